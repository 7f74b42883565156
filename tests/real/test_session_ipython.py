"""`Session.ipython` (S2 "Jobs" 4-6): one kernel per session; a detached cell is a job a rewind stops; close kills."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eukhe.api import Detached, Session, SessionSettings, Settled
from eukhe.clock import VirtualClock
from tests.real.budget_support import ASKED, SMALL_BUDGET_MS, detaches_exactly_at_the_budget
from tests.real.kernel_support import process_gone, run, until

pytestmark = pytest.mark.real


def test_a_sessions_cells_share_a_kernel_and_a_rewind_stops_a_cell_job_started_after_its_target(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()

    async def scenario() -> None:
        session = await Session.create(
            work, root=tmp_path / "sessions", settings=SessionSettings(tool_blocking_budget_ms=5000)
        )
        try:
            first = await session.ipython("import os\nseen = os.getcwd()\nseen")
            assert isinstance(first, Settled)
            assert first.result == repr(str(work))
            question = session.append("user", "spin")
            spinning = await session.ipython("print('spinning')\nwhile True:\n    pass", budget_ms=100)
            assert isinstance(spinning, Detached)
            assert [job.id for job in session.jobs.list()] == [spinning.job]
            answer = session.append("assistant", "spinning")
            rewound = await session.navigate_tree(answer.id)
            assert rewound.stopped_jobs == []  # the cell started before this entry: kept
            rewound = await session.navigate_tree(question.id)
            assert rewound.stopped_jobs == [spinning.job]  # started after the question: stopped
            again = await session.ipython("seen")
            assert isinstance(again, Settled)
            assert again.result == repr(str(work))  # interrupted, not killed: the namespace stays
            kernel = session.kernel
            assert kernel is not None
            pid = kernel.pid
            assert pid is not None
        finally:
            await session.close()
        await until(lambda: process_gone(pid), what="the kernel to end with its session")

    run(scenario())


def test_the_session_budget_caps_ipython(tmp_path: Path) -> None:
    """S2 jobs 4: a cell call asking for more than the session's budget, or for nothing, detaches at the session's
    budget as a cell job (virtual clock: exact to the millisecond)."""
    work = tmp_path / "work"
    work.mkdir()

    async def scenario() -> None:
        clock = VirtualClock()
        session = await Session.create(
            work,
            root=tmp_path / "sessions",
            settings=SessionSettings(tool_blocking_budget_ms=SMALL_BUDGET_MS),
            clock=clock,
        )
        try:
            warm = await session.ipython("1")  # the kernel starts; the virtual clock stands still meanwhile
            assert isinstance(warm, Settled)
            started: list[str] = []
            for asked in ASKED:
                started.clear()
                call = asyncio.ensure_future(
                    session.ipython("print('spinning')\nwhile True:\n    pass", asked, on_start=started.append)
                )
                await until(lambda: bool(started), what="the cell to run")  # running, and the call waits on it
                answer = await detaches_exactly_at_the_budget(clock, call)
                assert (answer.job, answer.kind) == (started[0], "cell")
                cancelled = await session.jobs.cancel(answer.job)  # interrupted: the kernel is free for the next
                assert isinstance(cancelled, Settled)
        finally:
            await session.close()

    run(scenario())
