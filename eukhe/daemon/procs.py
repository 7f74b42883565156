"""Process housekeeping for the daemon: become a child subreaper, and end what a dead worker left behind.

A worker's jobs run in their own process groups. If the worker is killed (kill -9), its jobs would live on as
orphans; because the supervisor is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), they become its children, and
`end_orphans` kills their whole process groups and reaps them, so no process of a dead worker's jobs survives.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import time
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger("eukhe.daemon")

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stat_fields(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of a process from /proc, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[1]), int(rest[2])


def children_of(parent: int) -> list[tuple[int, int]]:
    """(pid, pgid) of each live or zombie child of `parent`."""
    found: list[tuple[int, int]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None and fields[1] == parent:
            found.append((int(entry), fields[2]))
    return found


def end_orphans(keep: Collection[int], timeout_s: float = 5.0) -> list[int]:
    """Kill the process group of every child of this process not in `keep`, reap them; return the pids ended.

    Repeats until none is left (a killed leader's own children are reparented here next) or the timeout passes.
    """
    me, my_group = os.getpid(), os.getpgrp()
    ended: list[int] = []
    deadline = time.monotonic() + timeout_s
    while True:
        orphans = [(pid, group) for pid, group in children_of(me) if pid not in keep]
        if not orphans:
            return ended
        for pid, group in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group not in (my_group, 0):
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    ended.append(pid)
        if time.monotonic() > deadline:
            log.warning("orphans still alive after %.0f s: %s", timeout_s, orphans)
            return ended
        time.sleep(0.005)  # a SIGKILLed process takes a moment to become reapable


def group_alive(pgid: int) -> bool:
    """True if any process (not a zombie) is left in the group."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and fields[2] == pgid and fields[0] != "Z":
                return True
    return False
