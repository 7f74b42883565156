"""The jobs shell on a virtual clock, without processes: Job, JobTable listeners, wait_until edges, rewind, quit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from eukhe.core.bound import Keep, Off, On, OutputLimits
from eukhe.core.job import DeadlinePassed, End, EndedInTime, Exited, Killed
from eukhe.jobs import Job, JobSpec, JobTable, JobTableClosedError, MonotonicClock, VirtualClock, wait_until

T = TypeVar("T")
CAP4 = On(OutputLimits(4, 100, Keep.HEAD))


class LazyOwner:
    """An owner that only records kill requests; the test reports ends itself (a kill that takes time)."""

    def __init__(self) -> None:
        self.kills: list[str] = []

    def kill(self, job: Job) -> None:
        self.kills.append(job.id)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, End | None]] = []

    def job_started(self, job: Job) -> None:
        self.events.append(("start", job.id, job.end))

    def job_ended(self, job: Job, end: End) -> None:
        self.events.append(("end", job.id, end))


def run(body: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(body())


async def turn() -> None:
    for _ in range(2):
        await asyncio.sleep(0)


def make_table() -> tuple[JobTable, VirtualClock]:
    clock = VirtualClock()
    ids = iter(range(100))
    return JobTable(clock, new_id=lambda: f"j{next(ids)}"), clock


def test_a_job_counts_the_bytes_written_before_it_became_a_job_first() -> None:
    table, _ = make_table()
    job = table.start(JobSpec("cell", "x = 1", CAP4, None, written=b"abcdef"), LazyOwner())
    job.write(b"gh")
    assert (job.kept, job.dropped) == (4, 4)
    assert job.snapshot().text == b"abcd"
    assert job.snapshot().bytes_kept + job.snapshot().bytes_dropped == 8


def test_listeners_hear_one_start_and_one_end_in_order() -> None:
    table, _ = make_table()
    recorder = Recorder()
    stop = table.subscribe(recorder)
    owner = LazyOwner()
    job = table.start(JobSpec("bash", "sleep", Off()), owner)
    job.kill()
    job.kill()
    assert owner.kills == ["j0"]  # one request through the owner
    assert job.running  # the end comes when the owner reports it
    assert job.finish(Killed()) is True
    assert job.finish(Exited(0)) is False
    job.kill()
    assert owner.kills == ["j0"]  # no kill after the end
    assert recorder.events == [("start", "j0", None), ("end", "j0", Killed())]
    stop()
    table.start(JobSpec("bash", "b", Off()), owner).finish(Exited(1))
    assert len(recorder.events) == 2
    assert job.row().to_json() == {
        "id": "j0",
        "kind": "bash",
        "command": "sleep",
        "status": "ended",
        "started_ms": 0,
        "bytes_kept": 0,
        "bytes_dropped": 0,
        "lines_kept": 0,
        "lines_dropped": 0,
        "exit_code": None,
        "killed": True,
        "reason": None,
        "tty": False,
    }


def test_wait_until_settles_detaches_and_leaves_no_timer() -> None:
    async def body() -> None:
        table, clock = make_table()
        job = table.start(JobSpec("t", "t", Off()), LazyOwner())
        waiting = asyncio.create_task(wait_until(job, 3))
        clock.tick()
        await turn()
        assert not waiting.done()
        job.finish(Exited(5))
        await turn()
        assert waiting.result() == EndedInTime(Exited(5))
        assert clock.pending() == 0

        other = table.start(JobSpec("t", "t", Off()), LazyOwner())
        late = asyncio.create_task(wait_until(other, 3))
        await turn()
        clock.tick()  # t = 2
        await turn()
        assert not late.done()
        clock.tick()  # t = 3: the deadline
        await turn()
        assert late.result() == DeadlinePassed(3)
        assert other.running  # the job goes on

        cancelled = asyncio.create_task(wait_until(other, 100))
        await turn()
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert other.running
        assert clock.pending() == 0
        assert await wait_until(job, 3) == DeadlinePassed(3)  # passed deadline, end ready: detached at once

    run(body)


def test_wait_until_on_the_monotonic_clock() -> None:
    async def body() -> None:
        table = JobTable(MonotonicClock())
        job = table.start(JobSpec("t", "t", Off()), LazyOwner())
        asyncio.get_running_loop().call_soon(job.finish, Exited(0))
        assert await wait_until(job, table.clock.now_ms() + 10_000) == EndedInTime(Exited(0))
        other = table.start(JobSpec("t", "t", Off()), LazyOwner())
        verdict = await wait_until(other, table.clock.now_ms() + 5)
        assert isinstance(verdict, DeadlinePassed)
        assert verdict.at_ms >= 0
        assert job.id.startswith("job-")
        assert job.id != other.id

    run(body)


def test_rewind_splits_stopped_and_stopping_at_its_deadline() -> None:
    async def body() -> None:
        table, clock = make_table()
        owner = LazyOwner()
        table.observe("e0")
        kept = table.start(JobSpec("t", "kept", Off()), owner)
        table.observe("e1")
        quick = table.start(JobSpec("t", "quick", Off()), owner)
        slow = table.start(JobSpec("t", "slow", Off()), owner)
        rewinding = asyncio.create_task(table.rewind("e1", 2))
        await turn()
        assert owner.kills == ["j1", "j2"]
        quick.finish(Killed())
        clock.advance(2)
        await turn()
        rewound = rewinding.result()
        assert rewound.stopped == (quick,)
        assert rewound.stopping == (slow,)
        assert kept.running
        assert table.running() == (kept, slow)
        assert table.rewind_to("from-before-the-open") == (kept, slow)

    run(body)


def test_quit_kills_every_running_job_and_refuses_new_starts() -> None:
    async def body() -> None:
        table, _ = make_table()
        owner = LazyOwner()
        first = table.start(JobSpec("t", "a", Off()), owner)
        done = table.start(JobSpec("t", "b", Off()), owner)
        done.finish(Exited(0))
        rewound = await table.quit(0)
        assert owner.kills == [first.id]
        assert rewound.stopping == (first,)
        with pytest.raises(JobTableClosedError):
            table.start(JobSpec("t", "c", Off()), owner)
        assert table.get(first.id) is first
        assert table.jobs() == (first, done)

    run(body)


def test_a_jobs_counts_equal_its_window_in_bytes_and_lines_also_when_the_line_limit_binds() -> None:
    """With limits of 100 bytes and 2 lines on `a\\nb\\nc\\n`, the window keeps 4 bytes in 2 lines and drops 2 in 1:
    what a job reports counts from its window, not from the model's byte cap alone (which would say 6/0)."""
    table, _ = make_table()
    job = table.start(JobSpec("bash", "printf", On(OutputLimits(100, 2, Keep.TAIL)), None), LazyOwner())
    job.write(b"a\nb\nc\n")
    window = job.snapshot()
    assert (window.text, window.bytes_kept, window.bytes_dropped) == (b"b\nc\n", 4, 2)
    row = job.row()
    assert (row.bytes_kept, row.bytes_dropped, row.lines_kept, row.lines_dropped) == (4, 2, 2, 1)
    assert job.finish(Exited(0))
    answer = job.answer(EndedInTime(Exited(0)), 0)
    assert (answer.output.bytes_kept, answer.output.bytes_dropped) == (4, 2)
    ended = job.row()
    assert (ended.bytes_kept, ended.bytes_dropped, ended.lines_kept, ended.lines_dropped) == (4, 2, 2, 1)
