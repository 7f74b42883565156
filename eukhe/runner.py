"""Running one command with its output bounded (`eukhe run`): a real child, stdout and stderr merged in arrival
order on one pipe, streamed through `BoundedOutput`.

A command that exits while a background process still holds the pipe does not hang the run: after the command's
exit, the runner reads on while output keeps arriving, for at most `DRAIN_AFTER_EXIT_S`, then stops reading and
says so (the background process is left alone: `eukhe run` mirrors a foreground command, it does not own a job).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from eukhe.core.bound import Truncation
from eukhe.core.job import exited
from eukhe.errors import EukheError
from eukhe.output import BoundedOutput, BoundedResult

READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20
F_SETPIPE_SZ = 1031
DRAIN_AFTER_EXIT_S = 2.0
IDLE_AFTER_EXIT_S = 0.1


class CommandNotStartedError(EukheError):
    """The command could not be started (not found, not executable, ...)."""

    code = "command_not_started"
    exit_code = 127

    def __init__(self, command: str, reason: str) -> None:
        super().__init__(f"cannot start {command!r}: {reason}")
        self.command = command
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RunResult:
    """How the command ended and its bounded output."""

    exit_code: int
    output: BoundedResult
    signal: int | None
    stopped_reading: bool  # a background process still held the pipe when the runner stopped reading


def exit_code_of(returncode: int) -> tuple[int, int | None]:
    """The shell's exit code for a child's return code (128 + signal for a child killed by a signal)."""
    return exited(returncode).code, (-returncode if returncode < 0 else None)


@contextlib.contextmanager
def _interrupts_go_to_the_child() -> Iterator[None]:
    """While the child runs, Ctrl-C reaches it through the terminal; the runner keeps reading so nothing is lost.
    A Python handler (not SIG_IGN) is used so the child, after exec, gets the default action back."""

    def note(signum: int, frame: FrameType | None) -> None:
        del signum, frame

    try:
        previous = signal.signal(signal.SIGINT, note)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_bounded(
    argv: Sequence[str], truncation: Truncation, artifact_dir: Path | None, artifact_max_bytes: int | None = None
) -> RunResult:
    """Run `argv`, bound its merged output, and return how it ended (`artifact_max_bytes`: the artifact's cap,
    None: the process's)."""
    if not argv:
        raise ValueError("no command")
    output = BoundedOutput(truncation, artifact_dir, artifact_prefix="run", artifact_max_bytes=artifact_max_bytes)
    with _interrupts_go_to_the_child():
        try:
            child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)
        except OSError as error:
            raise CommandNotStartedError(argv[0], error.strerror or str(error)) from None
        assert child.stdout is not None
        with child:
            # A bigger pipe only saves wake-ups; a refusal (the user's pipe quota) is fine.
            with contextlib.suppress(OSError):
                fcntl.fcntl(child.stdout.fileno(), F_SETPIPE_SZ, PIPE_SIZE)
            stopped_reading = _pump(child, output)
    code, signum = exit_code_of(child.returncode)
    return RunResult(code, output.close(), signum, stopped_reading)


def _pump(child: subprocess.Popen[bytes], output: BoundedOutput) -> bool:
    """Move the child's output into `output` until EOF; returns True if reading stopped before EOF."""
    assert child.stdout is not None
    fd = child.stdout.fileno()
    exited_at: float | None = None
    last_data = time.monotonic()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            ready = selector.select(IDLE_AFTER_EXIT_S if exited_at is not None else 0.5)
            if ready:
                data = os.read(fd, READ_SIZE)
                if not data:
                    child.wait()
                    return False
                output.write(data)
                last_data = time.monotonic()
            if exited_at is None and child.poll() is not None:
                exited_at = time.monotonic()
            if exited_at is not None:
                now = time.monotonic()
                if now - exited_at > DRAIN_AFTER_EXIT_S or now - last_data > IDLE_AFTER_EXIT_S:
                    return True
