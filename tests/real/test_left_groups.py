"""What a reopen does with the process group of a job whose host died (the case bench/soak.py's kill_worker fault
makes): a worker killed -9 while its supervisor was gone leaves its jobs' groups to init, and nothing else would
end them. The reopen that records such a job ended ends its group, but only a group that is still
the job's: same boot, and its leader the same process, or (the leader gone) a member carrying the job's mark. The
machine's pid_max can be 32768, so a later group with the same number is a real case, not a theory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from eukhe.core.jobends import GroupMark
from eukhe.jobs.bash import JOB_MARK_ENV, end_left_group
from eukhe.procs import group_alive, group_members, start_ticks

pytestmark = pytest.mark.real

BOOT = "boot-a"


def wait_for(check: object, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)  # bounded poll of a real process's state
    return True


@pytest.fixture
def groups() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Process groups a test starts (by their leaders); whatever is left of them is killed and reaped at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for leader in started:
        if group_alive(leader.pid):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=10)


def start_group(groups: list[subprocess.Popen[bytes]], script: str, mark: str | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop(JOB_MARK_ENV, None)
    if mark is not None:
        env[JOB_MARK_ENV] = mark
    process = subprocess.Popen(["bash", "-c", script], env=env, process_group=0)
    groups.append(process)
    return process


def test_a_left_group_whose_leader_is_the_jobs_is_ended(groups: list[subprocess.Popen[bytes]]) -> None:
    leader = start_group(groups, "sleep 600", "mark-1")
    start = start_ticks(leader.pid)
    assert start is not None
    assert end_left_group(GroupMark(leader.pid, start, "mark-1"), BOOT, BOOT)
    assert leader.wait(timeout=10) == -signal.SIGKILL


def test_a_left_group_whose_leader_has_ended_is_ended_by_a_member_that_carries_the_mark(
    groups: list[subprocess.Popen[bytes]],
) -> None:
    leader = start_group(groups, "sleep 600 & echo $! ; exit 0", "mark-2")
    leader.wait(timeout=10)
    assert wait_for(lambda: group_members(leader.pid))  # the sleep lives on in the group, its leader gone
    assert end_left_group(GroupMark(leader.pid, 1, "mark-2"), BOOT, BOOT)
    assert wait_for(lambda: not group_alive(leader.pid))


@pytest.mark.parametrize("case", ["another_leader", "leader_gone_no_mark", "another_boot", "unknown_boot"])
def test_a_left_group_that_is_not_the_jobs_is_left_alone(groups: list[subprocess.Popen[bytes]], case: str) -> None:
    """The number names another group now (another leader, or no member with the job's mark), or the job ran in
    another boot (or one not known): the group is not the job's, and it lives on."""
    script = "sleep 600 & wait" if case != "leader_gone_no_mark" else "sleep 600 & exit 0"
    leader = start_group(groups, script, "someone-elses" if case == "leader_gone_no_mark" else "mark-3")
    if case == "leader_gone_no_mark":
        leader.wait(timeout=10)
    start = start_ticks(leader.pid) or 1
    mark = GroupMark(leader.pid, start + 1 if case == "another_leader" else start, "mark-3")
    started_boot = {"another_boot": "boot-b", "unknown_boot": None}.get(case, BOOT)
    assert not end_left_group(mark, started_boot, BOOT)
    time.sleep(0.1)  # a kill would have landed by now; the group must still be there
    assert group_alive(leader.pid)
