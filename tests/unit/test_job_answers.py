"""What a job tells its callers (S2 jobs 1-4): its row, a blocking call's Settled/Detached answer, the cancel of a
blocking call, the table's ids. Written to kill the survivors of the mutation run over eukhe/jobs (docs/testing.md):
each assertion pins a field or a branch a mutant changed without any test noticing."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from eukhe.core.bound import Off, On, OutputLimits
from eukhe.core.job import DeadlinePassed, EndedInTime, Exited, Killed
from eukhe.jobs import Job, JobSpec, JobTable, JobTableClosedError, VirtualClock
from eukhe.jobs.job import CellEnding, end_fields
from eukhe.jobs.wait import CallCancelledError, settle_or_detach
from eukhe.records.jobs import CellError, Detached, Settled

SMALL = On(OutputLimits(max_bytes=4, max_lines=10))


class Owner:
    """Records kills; ends the job as killed when told to (`obliging`)."""

    def __init__(self, obliging: bool = False) -> None:
        self.kills: list[str] = []
        self.obliging = obliging

    def kill(self, job: Job) -> None:
        self.kills.append(job.id)
        if self.obliging:
            job.finish(Killed())


def test_table_ids_are_job_and_8_hex_digits_and_a_reserved_id_is_kept() -> None:
    table = JobTable(VirtualClock())
    fresh = table.new_id()
    assert re.fullmatch(r"job-[0-9a-f]{8}", fresh), fresh
    job = table.start(JobSpec("bash", "true", Off()), Owner(), job_id=fresh)
    assert job.id == fresh  # a reserved id is the job's
    again = table.start(JobSpec("bash", "true", Off()), Owner(), job_id=fresh)
    assert again.id != fresh  # an id in use is not taken twice
    assert re.fullmatch(r"job-[0-9a-f]{8}", again.id)


def test_a_closed_table_says_why_it_starts_nothing() -> None:
    async def scenario() -> None:
        table = JobTable(VirtualClock())
        await table.quit(0)
        with pytest.raises(JobTableClosedError, match="quitting"):
            table.start(JobSpec("bash", "true", Off()), Owner())

    asyncio.run(scenario())


def test_rows_say_running_then_the_end_with_its_code_or_the_kill() -> None:
    table = JobTable(VirtualClock(), new_id=iter(["a", "b"]).__next__)
    exits = table.start(JobSpec("bash", "exit 3", Off()), Owner())
    killed = table.start(JobSpec("bash", "sleep 9", Off()), Owner(obliging=True))
    exits.write(b"hi\n")
    row = exits.row()
    assert (row.status, row.exit_code, row.killed, row.bytes_kept, row.lines_kept) == ("running", None, False, 3, 1)
    exits.finish(Exited(3))
    row = exits.row()
    assert (row.id, row.kind, row.command, row.status, row.exit_code, row.killed) == (
        "a",
        "bash",
        "exit 3",
        "ended",
        3,
        False,
    )
    killed.kill()
    row = killed.row()
    assert (row.status, row.exit_code, row.killed) == ("ended", None, True)
    assert end_fields(Exited(0)) == (0, False)
    assert end_fields(Killed()) == (None, True)
    assert end_fields(None) == (None, False)


def test_answers_carry_the_job_its_end_and_its_window() -> None:
    table = JobTable(VirtualClock(), new_id=iter(["a", "c"]).__next__)
    job = table.start(JobSpec("bash", "echo hi", Off()), Owner())
    job.write(b"hi\n")
    detached = job.answer(DeadlinePassed(250), 250)
    assert isinstance(detached, Detached)
    assert (detached.job, detached.kind, detached.command, detached.budget_ms) == ("a", "bash", "echo hi", 250)
    assert detached.output.text == "hi\n"
    job.finish(Exited(2))
    settled = job.answer(EndedInTime(Exited(2)), 250)
    assert isinstance(settled, Settled)
    assert (settled.job, settled.kind, settled.command, settled.exit_code, settled.killed) == (
        "a",
        "bash",
        "echo hi",
        2,
        False,
    )
    assert (settled.output.text, settled.outcome, settled.result, settled.error) == ("hi\n", None, None, None)
    cell = table.start(JobSpec("cell", "1/0", Off()), Owner())
    error = CellError(ename="ZeroDivisionError", evalue="division by zero", traceback=["x"])
    cell.cell = CellEnding(outcome="error", result="r", error=error)
    cell.finish(Killed())
    answer = cell.answer(EndedInTime(Killed()), 10)
    assert isinstance(answer, Settled)
    assert (answer.kind, answer.exit_code, answer.killed, answer.outcome, answer.result, answer.error) == (
        "cell",
        None,
        True,
        "error",
        "r",
        error,
    )


def test_past_its_limits_a_job_spills_to_an_artifact_in_its_dir_and_its_final_window_stays(tmp_path: Path) -> None:
    table = JobTable(VirtualClock(), new_id=iter(["a"]).__next__)
    job = table.start(JobSpec("bash", "seq", SMALL, tmp_path), Owner())
    job.write(b"0123456789")
    job.finish(Exited(0))
    final = job.result()
    assert final.artifact is not None
    assert Path(final.artifact).parent == tmp_path
    assert Path(final.artifact).name.startswith("job-a-")
    assert Path(final.artifact).read_bytes() == b"0123456789"
    assert (final.bytes_kept, final.bytes_dropped) == (4, 6)
    assert job.snapshot() is final  # once ended, the window is the final one
    assert job.row().bytes_kept + job.row().bytes_dropped == 10


def test_a_blocking_call_settles_detaches_or_when_cancelled_kills_its_job_and_says_how_it_ended() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        table = JobTable(clock, new_id=iter(["a", "b", "c"]).__next__)
        quick = table.start(JobSpec("bash", "true", Off()), Owner())
        quick.finish(Exited(0))
        settled = quick.answer(await settle_or_detach(quick, clock.now_ms() + 100, 100), 100)
        assert isinstance(settled, Settled)
        assert settled.exit_code == 0
        slow = table.start(JobSpec("bash", "sleep", Off()), Owner())
        detached = slow.answer(await settle_or_detach(slow, clock.now_ms(), 100), 100)
        assert isinstance(detached, Detached)
        assert detached.budget_ms == 100
        owner = Owner(obliging=True)
        cancelled = table.start(JobSpec("bash", "sleep", Off()), owner)
        call = asyncio.ensure_future(settle_or_detach(cancelled, clock.now_ms() + 1_000, 1_000))
        await asyncio.sleep(0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert owner.kills == ["c"]
        assert isinstance(cancelled.end, Killed)

    asyncio.run(scenario())


def test_a_cancelled_calls_error_says_how_its_job_ended() -> None:
    table = JobTable(VirtualClock(), new_id=iter(["a", "b", "c"]).__next__)
    killed = table.start(JobSpec("bash", "x", Off()), Owner(obliging=True))
    killed.kill()
    exited = table.start(JobSpec("bash", "x", Off()), Owner())
    exited.finish(Exited(3))
    running = table.start(JobSpec("bash", "x", Off()), Owner())
    texts = [
        CallCancelledError(job.answer(verdict, 5))
        for job, verdict in (
            (killed, EndedInTime(Killed())),
            (exited, EndedInTime(Exited(3))),
            (running, DeadlinePassed(5)),
        )
    ]
    assert [str(error) for error in texts] == [
        "cancelled: job a ended (killed)",
        "cancelled: job b ended (exit 3)",
        "cancelled: job c was killed and is still stopping",
    ]
    assert {error.code for error in texts} == {"cancelled"}
    assert texts[0].answer.job == "a"


def test_a_new_id_that_collides_is_drawn_again() -> None:
    table = JobTable(VirtualClock(), new_id=iter(["job-a", "job-a", "job-b"]).__next__)
    table.start(JobSpec("bash", "true", Off()), Owner())
    assert table.new_id() == "job-b"


def test_a_closed_table_gives_its_exact_reason() -> None:
    async def scenario() -> None:
        table = JobTable(VirtualClock())
        await table.quit(0)
        with pytest.raises(JobTableClosedError) as refused:
            table.start(JobSpec("bash", "true", Off()), Owner())
        assert str(refused.value) == "the host is quitting: no new job starts"

    asyncio.run(scenario())


class LateOwner:
    """Ends a killed job `after_ms` later on the table's clock (a kill takes time)."""

    def __init__(self, clock: VirtualClock, after_ms: int) -> None:
        self.clock = clock
        self.after_ms = after_ms

    def kill(self, job: Job) -> None:
        self.clock.call_at(self.clock.now_ms() + self.after_ms, lambda: job.finish(Killed()))


async def turn() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_a_cancelled_call_waits_for_its_killed_jobs_end_within_its_budget_and_no_longer() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        table = JobTable(clock, new_id=iter(["a", "b"]).__next__)
        job = table.start(JobSpec("bash", "sleep", Off()), LateOwner(clock, 50))
        call = asyncio.ensure_future(settle_or_detach(job, clock.now_ms() + 1_000, 1_000))
        await turn()
        call.cancel()
        await turn()
        assert not call.done(), "the cancelled call waits for the killed job's end"
        clock.advance(50)
        await turn()
        assert call.cancelled() or call.done()
        assert isinstance(job.end, Killed)
        stuck = table.start(JobSpec("bash", "sleep", Off()), LateOwner(clock, 10_000))
        call = asyncio.ensure_future(settle_or_detach(stuck, clock.now_ms() + 1_000, 0))
        await turn()
        call.cancel()
        await turn()
        assert call.done(), "a budget of 0 waits for nothing"
        assert stuck.running

    asyncio.run(scenario())


def test_a_cancelled_call_kills_the_job_it_leaves_behind_not_the_one_it_waited_on() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        table = JobTable(clock, new_id=iter(["waiter", "cell"]).__next__)
        waiter = table.start(JobSpec("cell", "private wait", Off()), Owner())
        owner = Owner(obliging=True)
        became: list[Job] = []

        def left() -> Job:
            became.append(table.start(JobSpec("cell", "the cell as a job", Off()), owner))
            return became[0]

        call = asyncio.ensure_future(settle_or_detach(waiter, clock.now_ms() + 1_000, 1_000, left=left))
        await turn()
        assert not became, "nothing is left behind before a cancel"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert owner.kills == ["cell"]
        assert isinstance(became[0].end, Killed)
        assert waiter.running, "the job waited on is not the one killed"

    asyncio.run(scenario())
