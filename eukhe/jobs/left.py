"""What a bash job's shell leaves running, on real processes; the decisions are `eukhe.core.jobleft`'s.

- `snapshot` reads the process facts the core's `members` needs, and no more: an unconfined job's host's children
  (the environment of one only when its mark decides), the job's group when the host did not inherit it (a host
  that is no child subreaper: an orphan goes to init), and what is below the roots; a confined job's sandbox from its
  pid 1 down.
- `Keeper` is the host's end of a confined job's keeper: the shell's exit code as soon as the shell exits, and the
  release that lets the keeper, and with it the sandbox, end.
- `until_gone` waits for the last member's end on events: a pidfd for each of a few members; any end wakes it and it
  reads the members again (one that forked before it ended left the new process below the same roots, so it is
  found then). Only where no pidfd can be had (out of descriptors) does it poll, on the job's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from collections.abc import Callable, Collection, Mapping

from eukhe.clock import Clock, wait_until_deadline
from eukhe.core import jobleft as core
from eukhe.procs import group_members, stat_fields

WATCH_MAX = 8
"""At most this many members are watched by pidfd at once: the end of any one of them reads all of them again."""
POLL_MS = (2, 500)
"""Without pidfds: the first pause between reads of the members, and the longest."""


def snapshot(
    kin: core.Kin, *, mark: bytes, others: Mapping[int, int] | None = None, ours: Mapping[int, int] | None = None
) -> list[core.Proc]:
    """The facts `core.members` reads for `kin`, now: `mark` is the job's `NAME=value` environment item; `others`
    (pid: start) are children of the host known not to be the job's (other jobs' shells), whose environment is not
    read; `ours` (pid: start) are processes an earlier reading found carrying the mark, which keep it without a new
    read (a process that is exiting has no environment left to read, yet is not a zombie until its exit is done)."""
    known = others or {}
    kept = ours or {}
    procs: dict[int, core.Proc] = {}
    if isinstance(kin, core.Confined):
        init = _proc(kin.init)
        if init is None or not init.alive:
            return []
        procs[init.pid] = init
        roots = [kin.init]
    else:
        for pid in _children(kin.host):
            proc = _proc(pid)
            if proc is None:
                continue
            if core.needs_mark(proc, kin) and known.get(pid) != proc.start:
                marked = kept.get(pid) == proc.start or _carries(pid, mark)
                proc = core.Proc(proc.pid, proc.parent, proc.group, proc.alive, marked, None, proc.start)
            procs[pid] = proc
        if _group_exists(kin.group) and not any(p.group == kin.group and p.alive for p in procs.values()):
            for pid in group_members(kin.group):  # the host inherits no orphan: the group is read where it is
                proc = _proc(pid)
                if proc is not None:
                    procs[pid] = proc
        roots = [pid for pid, proc in procs.items() if core.is_root(proc, kin)]
    todo = list(roots)
    while todo:
        for pid in _children(todo.pop()):
            if pid in procs:
                continue
            proc = _proc(pid, inner=isinstance(kin, core.Confined))
            if proc is not None:
                procs[pid] = proc
                todo.append(pid)
    return list(procs.values())


def _proc(pid: int, *, inner: bool = False) -> core.Proc | None:
    """Process `pid`'s facts (`inner`: its pid in its own namespace too); None if it is gone."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    inner_pid = _inner_pid(pid) if inner else None
    alive = fields[0] not in (b"Z", b"X", b"x")
    return core.Proc(pid, int(fields[1]), int(fields[2]), alive, False, inner_pid, int(fields[19]))


def _inner_pid(pid: int) -> int | None:
    """Process `pid`'s pid in its innermost pid namespace (the last of its `NSpid` line)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


def _children(pid: int) -> list[int]:
    """The children of every thread of process `pid` (a child of another thread, or an orphan a subreaper's thread
    inherited, is listed under that thread)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                found.extend(int(word) for word in children.read().split())
        except (OSError, ValueError):
            continue
    return found


def _carries(pid: int, item: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return item in environ.read().split(b"\0")
    except OSError:
        return False


def _group_exists(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap(pids: Collection[int], procs: Collection[core.Proc]) -> None:
    """Reap the ended children `pids` (each as the snapshot named it: its start too, so a reused pid is never
    reaped in its place)."""
    starts = {proc.pid: proc.start for proc in procs}
    for pid in pids:
        fields = stat_fields(pid)
        if fields is None or len(fields) < 20 or fields[0] != b"Z" or int(fields[19]) != starts.get(pid):
            continue
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


class Keeper:
    """The host's end of a confined shell's keeper (`core.KEEPER_PREAMBLE`): `fds` go to the sandbox and `env` makes
    the shell read the preamble; `code` is the shell's exit code once the keeper reported it (None: it ended without
    a report); `release` lets it end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        ours, theirs = socket.socketpair()
        self._sock: socket.socket | None = ours
        self._theirs: socket.socket | None = theirs
        ours.setblocking(False)
        self._data = b""
        self.code: asyncio.Future[int | None] = loop.create_future()
        self._preamble: int | None = None
        try:
            read_end, write_end = os.pipe()
        except BaseException:
            self.release()
            raise
        self._preamble = read_end
        try:
            os.write(write_end, core.KEEPER_PREAMBLE.encode())  # far below a pipe's capacity: never blocks
        finally:
            os.close(write_end)
        self.fds = (theirs.fileno(), read_end)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The shell's environment: `env` with the keeper's preamble to read first."""
        return core.keeper_env(env, *self.fds)

    def started(self) -> None:
        """The sandbox holds its copies of the keeper's descriptors now: close ours and read the report."""
        self._close_theirs()
        if self._sock is not None:
            self.loop.add_reader(self._sock.fileno(), self.read_now)

    def read_now(self) -> None:
        """Read what the keeper wrote so far; a whole report (or its end) settles `code`."""
        sock = self._sock
        if sock is None or self.code.done():
            return
        while len(self._data) < core.MAX_REPORT_BYTES:
            try:
                chunk = sock.recv(core.MAX_REPORT_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if not chunk:
                break
            self._data += chunk
            if b"\n" in self._data:
                break
        self.loop.remove_reader(sock.fileno())
        self.code.set_result(core.reported_code(self._data))

    def release(self) -> None:
        """Close the host's end: a waiting keeper ends, and its sandbox with it (idempotent)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            if not self.code.done():
                self.loop.remove_reader(sock.fileno())
                self.code.set_result(None)
            sock.close()
        self._close_theirs()

    def _close_theirs(self) -> None:
        if self._theirs is not None:
            self._theirs.close()
            self._theirs = None
        preamble, self._preamble = self._preamble, None
        if preamble is not None:
            os.close(preamble)


async def until_gone(
    members: Callable[[], dict[int, int]],
    clock: Clock,
    deadline_ms: Callable[[], int | None],
    interrupt: asyncio.Future[None] | None = None,
) -> bool:
    """Wait until `members()` (pid: start) is empty, or `deadline_ms()` (None: none) passes on `clock`; whether it
    is. `interrupt`, when it is done, wakes the wait once (to read a deadline that changed)."""
    loop = asyncio.get_running_loop()
    pause = POLL_MS[0]
    while True:
        left = members()
        if not left:
            return True
        deadline = deadline_ms()
        if deadline is not None and clock.now_ms() >= deadline:
            return False
        woken: asyncio.Future[None] = loop.create_future()
        wake = functools.partial(_wake, woken)
        watched = _watch(left, loop, wake)
        poll = None
        if watched is None:  # no pidfd: poll
            poll = loop.call_later(pause / 1000, wake)
            pause = min(pause * 2, POLL_MS[1])
        heard = interrupt if interrupt is not None and not interrupt.done() else None
        if heard is not None:
            heard.add_done_callback(wake)
        try:
            if deadline is None:
                await woken
            else:
                await wait_until_deadline(clock, woken, deadline)
        finally:
            if heard is not None:
                heard.remove_done_callback(wake)
            if poll is not None:
                poll.cancel()
            for fd in watched or ():
                loop.remove_reader(fd)
                os.close(fd)


def _wake(woken: asyncio.Future[None], *_: object) -> None:
    if not woken.done():
        woken.set_result(None)


def _watch(left: dict[int, int], loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> list[int] | None:
    """A pidfd for each of at most WATCH_MAX members, each calling `wake` at its end; None when none can be had
    (a member that ended meanwhile calls `wake` at once)."""
    fds: list[int] = []
    woke = False
    for pid, start in sorted(left.items())[:WATCH_MAX]:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:  # ended meanwhile: read the members again at once
            woke = True
            continue
        except OSError:
            break
        fields = stat_fields(pid)
        if fields is None or len(fields) < 20 or int(fields[19]) != start:  # not the member any more
            os.close(fd)
            woke = True
            continue
        loop.add_reader(fd, wake)
        fds.append(fd)
    if woke:
        wake()
    return fds if fds or woke else None
