"""A job's whole life runs on its table's clock: a bash job's kill grace, the drain after the leader exits and the
group poll; a cell job's cancel grace. On a VirtualClock nothing of it moves until the test moves the clock, so a
test can step through a job's end exactly. Only real process events are awaited (bounded polling), never wall-clock
time.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from eukhe.clock import VirtualClock
from eukhe.core import job as core
from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.jobs import Job, JobTable
from eukhe.jobs.bash import BashOptions, BashRun, start_bash
from eukhe.kernel.cells import CellJobs
from eukhe.kernel.manager import KernelManager
from eukhe.procs import group_members
from eukhe.records.jobs import Detached
from tests.real.kernel_support import process_gone

pytestmark = pytest.mark.real

OPTIONS = BashOptions(kill_grace_ms=30_000, drain_ms=30_000)
"""Longer than any wait of the test: were they on the wall clock, nothing would end in time."""


async def until(fact: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Poll a real fact until it holds, at most `timeout_s` (the wall clock bounds the test, decides nothing)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout_s
    while not fact():
        assert loop.time() < give_up, "the fact never came true"
        await asyncio.sleep(0.01)


async def settle(turns: int = 20) -> None:
    """Let the loop run the callbacks a clock step woke (and the processes' answers arrive)."""
    for _ in range(turns):
        await asyncio.sleep(0.005)


async def started(command: str, cwd: Path, table: JobTable) -> tuple[Job, BashRun]:
    """A bash job of `table` running `command` in `cwd` with `OPTIONS`, and its owner."""
    job = await start_bash(command, cwd, truncation=DEFAULT_TRUNCATION, artifact_dir=None, table=table, options=OPTIONS)
    owner = job.owner
    assert isinstance(owner, BashRun)
    return job, owner


def test_a_kill_waits_the_grace_on_the_jobs_clock_then_kills_the_group(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        table = JobTable(clock)
        job, owner = await started("trap '' TERM; echo armed; sleep 1000 & sleep 1001; wait", tmp_path, table)
        await until(lambda: b"armed" in job.snapshot().text and len(group_members(owner.pgid)) >= 3)
        job.kill()  # SIGTERM to the group: ignored
        clock.advance(OPTIONS.kill_grace_ms - 1)
        await settle()
        assert job.running and len(group_members(owner.pgid)) >= 3  # the grace has not passed on the job's clock
        clock.advance(1)  # now it has: SIGKILL to the group
        await until(lambda: not group_members(owner.pgid))
        await until(lambda: not job.running)
        assert job.end == core.Killed()

    asyncio.run(scenario())


def ignores_term(pid: int) -> bool:
    """Whether the live process `pid` ignores SIGTERM (its SigIgn mask, /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    ignored = next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1]
    return bool(int(ignored, 16) & (1 << (signal.SIGTERM - 1)))


def test_a_cancelled_jobs_member_that_does_not_trap_term_is_gone_before_the_kill_grace_ends(tmp_path: Path) -> None:
    """The cancel's SIGTERM reaches the whole group at once: a member that does not trap it ends then, while the
    grace (on the job's clock, not moved) has not passed; the member that ignores it lives until the SIGKILL."""

    async def scenario() -> None:
        clock = VirtualClock()
        table = JobTable(clock)
        job, owner = await started(
            "sleep 1000 & echo plain $!; sh -c \"trap '' TERM; exec sleep 1001\" & echo trapper $!; wait",
            tmp_path,
            table,
        )

        def pids() -> dict[str, int]:
            return {
                w[0]: int(w[1]) for line in job.snapshot().text.decode().splitlines() if len(w := line.split()) == 2
            }

        await until(lambda: set(pids()) == {"plain", "trapper"})
        plain, trapper = pids()["plain"], pids()["trapper"]
        await until(lambda: ignores_term(trapper) and Path(f"/proc/{trapper}/comm").read_text() == "sleep\n")
        assert not process_gone(plain) and not ignores_term(plain)
        job.kill()
        await until(lambda: process_gone(plain))  # the grace has not passed: the clock did not move
        assert not process_gone(trapper) and job.running
        clock.advance(OPTIONS.kill_grace_ms)  # now it has: SIGKILL to the group
        await until(lambda: process_gone(trapper) and not group_members(owner.pgid))
        await until(lambda: not job.running)
        assert job.end == core.Killed()

    asyncio.run(scenario())


def test_the_drain_after_the_leader_exits_runs_on_the_jobs_clock(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        table = JobTable(clock)
        job, owner = await started("sleep 1000 & echo leader done", tmp_path, table)
        await until(owner.pipe.exited.done)  # the leader exited; the sleep still holds the pipe
        await settle()
        assert job.running  # the drain waits on the job's clock
        clock.advance(OPTIONS.drain_ms)  # the drain is over: the sleep goes on as a job of its own
        await until(lambda: not job.running)
        assert job.end == core.Exited(0)
        assert job.result().text == b"leader done\n"
        left = table.get(job.left_as or "")
        assert left is not None and left.running and group_members(owner.pgid) != []
        left.kill()  # its kill grace runs on the clock too: the SIGTERM ends the sleep at once
        await until(lambda: not group_members(owner.pgid))
        clock.advance(2_000)  # the EOF wait after the group is gone, also on the clock, if the pipe lingers
        await until(lambda: not left.running)
        assert left.end == core.Killed()

    asyncio.run(scenario())


def test_a_cell_jobs_cancel_grace_runs_on_the_jobs_clock_then_its_kernel_is_killed() -> None:
    """A cell job that ignores its interrupt is given the cancel grace on its table's clock: its kernel is killed
    only once the test moves the clock past it (the whole life of a cell job, too, is on the job's clock). The
    grace runs from the cancel: the clock moves at once, before the kernel has answered the interrupt."""
    grace_s = 30.0
    code = (
        "import time\n"
        "print('armed', flush=True)\n"
        "while True:\n"
        "    try:\n"
        "        time.sleep(0.01)\n"
        "    except KeyboardInterrupt:\n"
        "        print('ignored', flush=True)\n"
    )

    async def scenario() -> None:
        clock = VirtualClock()
        table = JobTable(clock)
        async with KernelManager() as manager:
            cells = CellJobs(manager, table, grace_s=grace_s)
            detached = await cells.ipython(code, 0)
            assert isinstance(detached, Detached)
            job = table.get(detached.job)
            assert job is not None
            await until(lambda: b"armed" in job.snapshot().text)
            kernel = manager.pid
            job.kill()
            clock.advance(round(grace_s * 1000) - 1)
            await until(lambda: b"ignored" in job.snapshot().text)  # interrupted, and it goes on
            await settle()
            assert job.running and manager.pid == kernel  # the grace has not passed on the job's clock
            clock.advance(1)
            await until(lambda: not job.running)
            assert manager.pid != kernel

    asyncio.run(asyncio.wait_for(scenario(), 120))
