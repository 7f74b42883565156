"""The bootstrap lock on real files and processes: its decisions are the core's (spec "The kernel environment" 5)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eukhe.core.kernel_local import (
    LOCK_NAME,
    AttemptVerdict,
    BesideKind,
    Owner,
    SweepVerdict,
    beside_name,
    format_owner,
    judge_attempt,
    judge_sweep,
)
from eukhe.kernel.bootstrap.dir_lock import (
    BootstrapLock,
    me,
    process_start,
    read_lock_facts,
    sweep,
)
from eukhe.kernel.bootstrap.errors import BootstrapLockTimeoutError

pytestmark = pytest.mark.real


@pytest.fixture
def live_child() -> Iterator[subprocess.Popen[bytes]]:
    """Another live process (not us), for a live owner that is not this one."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


def dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=10)
    assert process_start(child.pid) is None
    return child.pid


def files_beside(directory: Path) -> set[str]:
    return {name for name in os.listdir(directory) if name.startswith(LOCK_NAME)}


def test_process_start_reads_this_process_and_not_a_dead_one() -> None:
    own = me()
    assert own.pid == os.getpid()
    assert process_start(os.getpid()) == own.start
    assert process_start(dead_pid()) is None


def test_the_lock_verdicts_come_from_the_core_for_the_sweep(
    tmp_path: Path, live_child: subprocess.Popen[bytes]
) -> None:
    own = me()
    child_start = process_start(live_child.pid)
    assert child_start is not None
    gone = dead_pid()
    planted = {
        beside_name(BesideKind.CANDIDATE, live_child.pid, 0): format_owner(Owner(live_child.pid, child_start)),
        beside_name(BesideKind.CANDIDATE, live_child.pid, 1): format_owner(Owner(live_child.pid, child_start + 1)),
        beside_name(BesideKind.CANDIDATE, live_child.pid, 2): "",  # cut before its contents: decided by the pid
        beside_name(BesideKind.CANDIDATE, gone, 0): format_owner(Owner(gone, 5)),
        beside_name(BesideKind.CANDIDATE, own.pid, 7): format_owner(own),
        beside_name(BesideKind.STALE, live_child.pid, 3): format_owner(Owner(gone, 5)),
        beside_name(BesideKind.STALE, gone, 1): "",
        "kernel-venv": "not ours",
        f"{LOCK_NAME}.candidate-x-1": "foreign",
    }
    for name, text in planted.items():
        (tmp_path / name).write_text(text)
    decisions = sweep(tmp_path)
    judged = {d.name for d in decisions}
    assert judged == set(planted) - {"kernel-venv", f"{LOCK_NAME}.candidate-x-1"}  # foreign names are left alone
    for decision in decisions:
        assert judge_sweep(decision.recorded_start, decision.running_start) is decision.verdict
        assert (tmp_path / decision.name).exists() == (decision.verdict is SweepVerdict.KEEP)
    left = set(os.listdir(tmp_path))
    assert left == {
        beside_name(BesideKind.CANDIDATE, live_child.pid, 0),
        beside_name(BesideKind.CANDIDATE, live_child.pid, 2),
        beside_name(BesideKind.CANDIDATE, own.pid, 7),
        beside_name(BesideKind.STALE, live_child.pid, 3),
        "kernel-venv",
        f"{LOCK_NAME}.candidate-x-1",
    }


def test_the_lock_verdicts_come_from_the_core_for_the_attempt(
    tmp_path: Path, live_child: subprocess.Popen[bytes]
) -> None:
    child_start = process_start(live_child.pid)
    assert child_start is not None
    gone = dead_pid()
    lock = tmp_path / LOCK_NAME
    now = time.time()
    cases = {
        "live owner": (format_owner(Owner(live_child.pid, child_start)), 0, "wait"),
        "reused pid": (format_owner(Owner(live_child.pid, child_start + 1)), 0, "set_aside"),
        "gone owner": (format_owner(Owner(gone, 1)), 0, "set_aside"),
        "no owner, young": ("", 10, "wait"),
        "no owner, 30 s": ("garbage", 29, "wait"),
        "no owner, old": ("", 31, "set_aside"),
    }
    for label, (text, age_s, expected) in cases.items():
        lock.write_text(text)
        os.utime(lock, (now - age_s, now - age_s))
        facts, inode = read_lock_facts(lock, now=now)
        assert inode == lock.stat().st_ino
        assert judge_attempt(facts).value == expected, label
    lock.unlink()
    facts, inode = read_lock_facts(lock)
    assert (facts.present, inode) == (False, None)
    assert judge_attempt(facts) is AttemptVerdict.RETRY


def test_a_lock_held_by_a_live_process_makes_the_attempt_wait_and_leave_nothing(
    tmp_path: Path, live_child: subprocess.Popen[bytes]
) -> None:
    child_start = process_start(live_child.pid)
    assert child_start is not None
    (tmp_path / LOCK_NAME).write_text(format_owner(Owner(live_child.pid, child_start)))
    lock = BootstrapLock(tmp_path, timeout=0.3, poll=0.02)
    with pytest.raises(BootstrapLockTimeoutError):
        asyncio.run(lock.acquire())
    assert lock.waited
    assert files_beside(tmp_path) == {LOCK_NAME}  # the live owner's lock stays; no candidate or stale file


@pytest.mark.parametrize("contents", ["dead owner", "reused pid", "old unowned"])
def test_an_abandoned_lock_is_set_aside_and_taken(
    tmp_path: Path, live_child: subprocess.Popen[bytes], contents: str
) -> None:
    child_start = process_start(live_child.pid)
    assert child_start is not None
    lock_path = tmp_path / LOCK_NAME
    text = {
        "dead owner": format_owner(Owner(dead_pid(), 3)),
        "reused pid": format_owner(Owner(live_child.pid, child_start + 9)),
        "old unowned": "",
    }[contents]
    lock_path.write_text(text)
    old = time.time() - 120
    os.utime(lock_path, (old, old))

    async def take() -> str:
        async with BootstrapLock(tmp_path, timeout=5) as held:
            assert held.owner == me()
            return lock_path.read_text()

    assert asyncio.run(take()) == format_owner(me())
    assert files_beside(tmp_path) == set()  # released; the set-aside lock and the candidate are gone


def test_a_cancelled_attempt_leaves_no_candidate(tmp_path: Path, live_child: subprocess.Popen[bytes]) -> None:
    child_start = process_start(live_child.pid)
    assert child_start is not None
    (tmp_path / LOCK_NAME).write_text(format_owner(Owner(live_child.pid, child_start)))

    async def cancel_while_waiting() -> None:
        lock = BootstrapLock(tmp_path, timeout=None, poll=0.01)
        task = asyncio.create_task(lock.acquire())
        deadline = time.monotonic() + 5
        while not lock.waited and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_while_waiting())
    assert files_beside(tmp_path) == {LOCK_NAME}
