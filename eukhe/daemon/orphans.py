"""Process housekeeping for the daemon: become a child subreaper, and end what a dead worker left behind.

A worker's jobs run in their own process groups. If the worker is killed (kill -9), its jobs would live on as
orphans; because the supervisor is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), they become its children, and
`end_orphans` kills their whole process groups and reaps them, so no process of a dead worker's jobs survives.
The process facts come from `eukhe.procs`; the waiting is the clock's one poll loop.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import signal
from collections.abc import Collection

from eukhe.clock import Backoff, Clock, MonotonicClock, poll_until
from eukhe.procs import children_of

log = logging.getLogger("eukhe.daemon")

PR_SET_CHILD_SUBREAPER = 36
ORPHANS_TIMEOUT_MS = 5_000
REAP_BACKOFF = Backoff(first_ms=1, factor=2, longest_ms=20)
"""A SIGKILLed process takes a moment to become reapable."""


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library's functions, from the symbols already loaded in this process (no `find_library`: it runs
    `ldconfig` in a subprocess, a few ms at every worker start)."""
    return ctypes.CDLL(None, use_errno=True)


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux); False where unsupported."""
    try:
        return int(libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


async def end_orphans(
    keep: Collection[int], clock: Clock | None = None, timeout_ms: int = ORPHANS_TIMEOUT_MS
) -> list[int]:
    """Kill the process group of every child of this process not in `keep`, reap them; return the pids ended.

    Repeats until none is left (a killed leader's own children are reparented here next) or the timeout passes.
    """
    me, my_group = os.getpid(), os.getpgrp()
    ended: list[int] = []

    def sweep() -> bool:
        orphans = [(pid, group) for pid, group in children_of(me) if pid not in keep]
        for pid, group in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group not in (my_group, 0):
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    ended.append(pid)
        return not orphans

    clock = clock or MonotonicClock()
    if not await poll_until(clock, sweep, clock.now_ms() + timeout_ms, REAP_BACKOFF):
        log.warning("orphans still alive after %d ms: %s", timeout_ms, children_of(me))
    return ended
