"""Process facts, read in one place (psutil): who is alive, who is in a process group, whose child a process is.

A zombie has ended: it is never counted as alive. A process that vanishes while it is being read is simply not
there. The shell asks these facts; what to do about them (kill a group, wait, reap) is decided where it is used.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable

import psutil

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, ProcessLookupError, PermissionError)


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (not a zombie)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except _GONE:
        return False


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (the state first, then the parent, the group, the
    session...); None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    return text[text.rfind(b")") + 2 :].split()


def start_ticks(pid: int, *, ended_too: bool = False) -> int | None:
    """When the live process `pid` started, in clock ticks since boot (with its pid, it names the process across pid
    reuse); None if there is none, or a zombie (`ended_too`: a zombie's too)."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or (fields[0] in (b"Z", b"X", b"x") and not ended_too):
        return None
    return int(fields[19])


def reap_ended_child(pid: int, started: int) -> bool:
    """Reap `pid` if it is an ended child of this process (a zombie) that started at `started` clock ticks, so
    that a reused pid is never reaped in its place; whether it was."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] != b"Z":
        return False
    if int(fields[1]) != os.getpid() or int(fields[19]) != started:
        return False
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def has_controlling_terminal() -> bool:
    """Whether this process has a controlling terminal (it can open /dev/tty)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group `pgid`."""
    members: list[int] = []
    for process in psutil.process_iter(["status"]):
        if process.info["status"] in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD, None):
            continue
        if _pgid(process.pid) == pgid:
            members.append(process.pid)
    return members


def members_carrying(pgid: int, item: str) -> int:
    """How many live members of process group `pgid` have `item` (NAME=value) in their environment."""
    wanted = os.fsencode(item)
    count = 0
    for pid in group_members(pgid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                count += wanted in environ.read().split(b"\0")
        except OSError:
            continue
    return count


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group `pgid`."""
    try:
        os.killpg(pgid, 0)  # the cheap answer first: no process at all, zombies included
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return bool(group_members(pgid))


def children_of(parent: int) -> list[tuple[int, int]]:
    """(pid, pgid) of each child of `parent`, zombies included (they wait to be reaped)."""
    found: list[tuple[int, int]] = []
    with contextlib.suppress(*_GONE):
        for child in psutil.Process(parent).children():
            pgid = _pgid(child.pid)
            found.append((child.pid, 0 if pgid is None else pgid))
    return found


def main_thread_children(pid: int) -> list[int] | None:
    """The children that process `pid`'s main thread forked, now (one read of /proc, no scan of every process); None
    when it cannot be read."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as children:
            return [int(word) for word in children.read().split()]
    except (OSError, ValueError):
        return None


def signal_group(pgid: int, signum: int) -> None:
    """Send `signum` to process group `pgid`; a group that is gone (or not ours) is left alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def kill_group(pgid: int) -> None:
    """SIGKILL to process group `pgid`, if it is still there."""
    signal_group(pgid, signal.SIGKILL)


JOB_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)
"""The signals a job hears whatever its host does with them: Ctrl-C and Ctrl-\\ on its terminal, a kill's SIGTERM."""


def job_signals_reset() -> Callable[[], None] | None:
    """What a job's process runs before its exec when this thread ignores or blocks one of JOB_SIGNALS (a host
    started in a shell's background or by a program that ignores Ctrl-C; both are inherited across exec, and a shell
    cannot undo an ignore it inherited): the default action and an unblocked mask for them. None in the usual case
    (a handler set in Python is reset by exec): the spawn then stays on its fast path."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    if any(signal.getsignal(number) == signal.SIG_IGN or number in blocked for number in JOB_SIGNALS):
        return _default_job_signals
    return None


def _default_job_signals() -> None:
    for number in JOB_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)


BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
BOOT_ID_ENV = "EUKHE_BOOT_ID"
"""Overrides the boot id (tests simulate a restart of the machine with it); empty or unset: the kernel's."""


def boot_id() -> str | None:
    """This boot of the machine: `$EUKHE_BOOT_ID` if set, else the kernel's random boot id (None if unreadable). A
    job node records it, so a reopen after a restart of the machine can say so."""
    override = os.environ.get(BOOT_ID_ENV)
    if override:
        return override
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as handle:
            return handle.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None
