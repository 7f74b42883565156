"""The process group inside a confined job's sandbox, learnt from bwrap's `--info-fd`.

bwrap runs the command in a new session inside its own pid namespace: the host's process group of the job holds
only bwrap itself, and the command's group is the sandbox's first process (its pid 1, which bwrap reports as
`child-pid`). So a kill's SIGTERM goes to that inner group (pid 1 of a namespace takes no signal it has no handler
for, so only the command and its children hear it), and the SIGKILL after the grace ends bwrap, whose
`--die-with-parent` takes the whole namespace with it: no process of the job outlives it, not even one that called
setsid. A signal asked for before bwrap has reported goes out as soon as it does.

bwrap reports pid 1 as soon as it is cloned: pid 1 may not have made its session yet, nor forked the command. A
SIGTERM then would reach no process that heeds it (the group is not there, or holds pid 1 alone), and the command
forked after would never hear it; so until pid 1 has a child, a SIGTERM is a SIGKILL to pid 1 by its pid (nothing
of the command ran, so nothing needed the grace), and a SIGKILL always goes to pid 1 by its pid too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Sequence

import msgspec

from eukhe.clock import Clock, poll_until
from eukhe.procs import main_thread_children, reap_ended_child, signal_group, start_ticks

Confine = Callable[[Sequence[str], int], list[str]]
"""Makes the argv that runs a command confined, given the descriptor bwrap writes its info to."""


class BwrapInfo(msgspec.Struct):
    """What bwrap writes to its `--info-fd` (it also writes namespace ids, which are not read)."""

    child_pid: int = msgspec.field(name="child-pid")


_INFO = msgspec.json.Decoder(BwrapInfo)
MAX_INFO_BYTES = 4096


class SandboxGroup:
    """The inner group of one confined job: `write_end` goes to bwrap, the read end is read on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._read_end, self.write_end = os.pipe()
        os.set_blocking(self._read_end, False)
        self._data = b""
        self.pgid: int | None = None
        self._started: int | None = None  # pid 1's start time: its pid names it across reuse
        self._pending = 0  # a signal asked for before bwrap reported: sent as soon as the group is known
        self._outer_kill: Callable[[], None] | None = None

    def started(self) -> None:
        """bwrap holds its copy of the write end now: close ours and read the report."""
        self._close_write_end()
        if self._read_end >= 0:
            self.loop.add_reader(self._read_end, self._readable)

    def _readable(self) -> None:
        self._read_report()

    def _read_report(self) -> None:
        """Read what bwrap wrote so far; at the report's end, learn pid 1 (and send a signal asked for before).
        Nothing once the report was read."""
        if self._read_end < 0:
            return
        while True:
            try:
                chunk = os.read(self._read_end, MAX_INFO_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if not chunk or len(self._data) >= MAX_INFO_BYTES:
                break
            self._data += chunk
        self.close()
        with contextlib.suppress(msgspec.DecodeError):
            self.pgid = _INFO.decode(self._data).child_pid
            # Its start even when it has ended already: until this process reaps it, its pid is its own.
            self._started = start_ticks(self.pgid, ended_too=True)
        if self._pending == signal.SIGTERM:
            self._terminate_now()
        elif self._pending:
            self._kill_now()

    def init(self) -> int | None:
        """The sandbox's pid 1, once bwrap named it (its report read now if the loop has not yet)."""
        self._read_report()
        return self.pgid

    def terminate(self) -> bool:
        """SIGTERM to the group inside, now or as soon as bwrap has named it (within ms of the start; the kill's
        SIGKILL after the grace does not wait for it). False once the report is over without naming it."""
        if self.pgid is None:
            if self._read_end < 0:
                return False
            self._pending = max(self._pending, signal.SIGTERM)
            return True
        self._terminate_now()
        return True

    def kill(self) -> None:
        """SIGKILL to the group inside (pid 1 of the namespace too: its end takes every process of it along)."""
        if self.pgid is None:
            self._pending = signal.SIGKILL
        else:
            self._kill_now()

    def _terminate_now(self) -> None:
        """SIGTERM to the group once pid 1 has forked the command into it; before that, SIGKILL to pid 1."""
        if self.pgid is None:
            return
        if _has_child(self.pgid):
            signal_group(self.pgid, signal.SIGTERM)
        else:
            self._kill_now()

    def _kill_now(self) -> None:
        """SIGKILL to pid 1 by its pid (the group may not be made yet), if it is still the pid 1 bwrap named; its end
        takes every process of the namespace along."""
        if self.pgid is not None and self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pgid, signal.SIGKILL)

    def alive(self) -> bool:
        """Whether the sandbox's pid 1 still lives. When it ends, the kernel kills every other process of its pid
        namespace and waits for them before pid 1 is a zombie: so its life is the life of all of them (one read
        of /proc, not a scan of every process)."""
        return self.pgid is not None and self._started is not None and start_ticks(self.pgid) == self._started

    def reap(self) -> bool:
        """Reap pid 1 once it ended, if this process is its parent by now; whether it was reaped. bwrap exits as soon
        as pid 1 has reported the command's status, so pid 1 ends after bwrap, as a child of the nearest subreaper:
        a daemon worker would keep it as a zombie for its whole life, one per confined job. A report the loop has
        not read yet (a quick job on a busy host) is read here first: bwrap is gone, so all of it is there."""
        self._read_report()
        return self.pgid is not None and self._started is not None and reap_ended_child(self.pgid, self._started)

    def close(self) -> None:
        """Stop reading the report (idempotent)."""
        fd, self._read_end = self._read_end, -1
        if fd >= 0:
            self.loop.remove_reader(fd)
            os.close(fd)
        self._close_write_end()

    def _close_write_end(self) -> None:
        fd, self.write_end = self.write_end, -1
        if fd >= 0:
            os.close(fd)


def _has_child(pid: int) -> bool:
    """Whether process `pid` has a child now."""
    return bool(main_thread_children(pid))


NAMESPACE_END_MS = 10_000
"""How long the end of a pid namespace may take after bwrap is gone (the kernel SIGKILLs its processes at once:
only a process stuck in the kernel reaches this)."""


def namespace_of(bwrap_pid: int) -> tuple[int, int] | None:
    """The pid 1 (pid, start ticks) of the namespace a running bwrap made: its one child."""
    pids = main_thread_children(bwrap_pid)
    if pids is None or len(pids) != 1:
        return None
    started = start_ticks(pids[0])
    return None if started is None else (pids[0], started)


async def namespace_gone(init: tuple[int, int], clock: Clock) -> None:
    """Wait until a namespace's pid 1 is gone or a zombie: by then every other process of it has ended (at most
    NAMESPACE_END_MS on `clock`)."""
    pid, started = init
    await poll_until(clock, lambda: start_ticks(pid) != started, clock.now_ms() + NAMESPACE_END_MS)
