"""A helper process that does part of a workspace's file-system work at once with this one (the spawn's copy, the
hand-back's stat checks): a file's system calls, made by two processes, where two threads of one would hand the
GIL over at every call.

Its input goes through a pipe, written by a thread so this side never waits for the helper to start reading; its
output and its last words go to unnamed files, so the helper never waits on this side either. Leaving the block
kills it if it still runs and reaps it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence

HELPER_FROM = 1000
"""From this many files (on more than one core) a helper process takes part of the work: below it, the helper's
start (tens of milliseconds) costs more than it saves."""


def helper_pays(files: int) -> bool:
    """Whether a helper process is worth starting for `files` files on this machine."""
    return files >= HELPER_FROM and (os.cpu_count() or 1) >= 2


class HelperFailedError(Exception):
    """The helper exited with an error or said nothing; `said` is its last line on stderr."""

    def __init__(self, code: int, said: str) -> None:
        super().__init__(f"exit {code}: {said or 'no output'}")
        self.code = code
        self.said = said


class HelperProcess:
    """One helper process, started now; `send` gives it its input once, `result` waits for its output. A helper
    that `streams` writes its output to a pipe instead, read as it comes (`output_fd`)."""

    def __init__(self, argv: Sequence[str], *, streams: bool = False) -> None:
        self._files = contextlib.ExitStack()  # closed by __exit__, with the process reaped first
        self._output = None if streams else self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        self._errors = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        stdout = subprocess.PIPE if self._output is None else self._output
        self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=stdout, stderr=self._errors)
        if streams:
            assert self._process.stdout is not None, "started with a pipe"
            self._files.enter_context(self._process.stdout)
        self._writer: threading.Thread | None = None

    def __enter__(self) -> HelperProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        if self._writer is not None:
            self._writer.join()  # the kill broke its pipe: it ends at once
        self._files.close()

    def send(self, data: bytes) -> None:
        """The helper's whole input; it starts its work once it has read it."""
        stdin = self._process.stdin
        assert stdin is not None, "started with a pipe"
        assert self._writer is None, "sent once"

        def write() -> None:
            with contextlib.suppress(OSError), stdin:  # a helper that died: `result` says how
                stdin.write(data)

        self._writer = threading.Thread(target=write, name="eukhe-helper-input", daemon=True)
        self._writer.start()

    @property
    def output_fd(self) -> int:
        """The read end of a streaming helper's output pipe."""
        stdout = self._process.stdout
        assert stdout is not None, "a streaming helper"
        return stdout.fileno()

    def failure(self) -> str | None:
        """Why the helper failed, if it has ended with an error (its exit status and last line on stderr)."""
        code = self._process.poll()
        if code is None or code == 0:
            return None
        return f"exit {code}: {self._last_words() or 'no output'}"

    def _last_words(self) -> str:
        """The helper's last line on stderr ("" if it said nothing)."""
        self._errors.seek(0)
        said = self._errors.read().decode("utf-8", "replace").strip().splitlines()
        return said[-1] if said else ""

    def result(self, *, within_s: float | None = None) -> bytes:
        """The helper's output, once it ended; HelperFailedError if it failed, wrote nothing, or had not ended
        `within_s` seconds from now (then it is killed: a hung helper never holds its caller)."""
        try:
            code = self._process.wait(within_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            raise HelperFailedError(self._process.returncode, f"no answer within {within_s:g} s") from None
        if self._writer is not None:
            self._writer.join()
        assert self._output is not None, "a helper that does not stream"
        self._output.seek(0)
        output = self._output.read()
        if code != 0 or not output:
            raise HelperFailedError(code, self._last_words())
        return output


def standalone_argv(script: str) -> tuple[str, ...]:
    """The argv that runs a standard-library-only script of this package: this interpreter, isolated, without
    site-packages."""
    return (sys.executable, "-I", "-S", script)
