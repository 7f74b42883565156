"""A Session's jobs on real processes (S2 jobs 4-7): nodes, rows, the prompt, rewinds and forks.

Named regression tests: `jobs_are_state_tree_nodes_the_prompt_shows_and_a_rewind_stops_the_orphans`,
`an_awaited_run_past_the_budget_answers_detached_and_its_end_records_its_row`,
`navigate_tree_stops_the_jobs_started_after_its_target`.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.harness import NoToolArgs
from eukhe.jobs import VirtualClock
from eukhe.jobs.bash import BashOptions
from eukhe.records.jobs import Detached, Settled
from eukhe.records.journal import EntryRecord
from eukhe.session import Session, SessionSettings, UnknownJobError
from eukhe.store.journal import read_journal
from eukhe.store.tree import UnknownEntryError
from tests.real.budget_support import ASKED, SMALL_BUDGET_MS, detaches_exactly_at_the_budget

pytestmark = pytest.mark.real

FAST = BashOptions(kill_grace_ms=500, drain_ms=50)
SETTINGS = SessionSettings(tool_blocking_budget_ms=5000)


async def poll_until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Wait for a real event (a process's output, a job's end) with a bounded deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for a real event")
        await asyncio.sleep(0.01)


async def new_session(tmp_path: Path, **kwargs: Any) -> Session:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return await Session.create(work, root=tmp_path / "sessions", settings=SETTINGS, bash_options=FAST, **kwargs)


async def detach(session: Session, command: str) -> str:
    run = await session.execute_bash_and_wait(command, budget_ms=0)
    assert isinstance(run, Detached)
    return run.job


def nodes(session: Session) -> set[str]:
    return set(session.view_state().of_type(JOB_DOC_TYPE))


def test_jobs_are_state_tree_nodes_the_prompt_shows_and_a_rewind_stops_the_orphans(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        assert "running-jobs" not in session.system_prompt()
        first = session.append("user", "start a server")
        kept = await detach(session, "sleep 60")
        second = session.append("assistant", "started")
        orphan = await detach(session, "sleep 60")
        await session.writer.idle()
        assert nodes(session) == {kept, orphan}
        prompt = session.system_prompt()
        assert '<running-jobs count="2">' in prompt
        assert kept in prompt
        assert orphan in prompt
        rewound = await session.navigate_tree(second.id)
        assert rewound.stopped_jobs == [orphan]
        assert rewound.stopping_jobs == []
        assert session.leaf == second.id
        await session.writer.idle()
        assert nodes(session) == {kept}
        assert '<running-jobs count="1">' in session.system_prompt()
        assert orphan not in session.system_prompt()
        assert first.id in {e.id for e in session.entries()}
        cancelled = await session.jobs.cancel(kept)
        assert isinstance(cancelled, Settled)
        assert (cancelled.exit_code, cancelled.killed) == (None, True)
        await session.writer.idle()
        assert nodes(session) == set()
        assert "running-jobs" not in session.system_prompt()
        await session.close()

    asyncio.run(scenario())


def test_an_awaited_run_past_the_budget_answers_detached_and_its_end_records_its_row(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        session = await new_session(tmp_path, clock=clock)
        fifo = session.cwd / "go"  # in the working directory: a confined job sees it
        os.mkfifo(fifo)
        call = asyncio.ensure_future(session.execute_bash_and_wait(f"echo before; read line < {fifo}; echo after", 250))
        await poll_until(lambda: bool(session.job_table.jobs()))
        (job,) = session.job_table.jobs()
        await poll_until(lambda: job.snapshot().text == b"before\n")
        clock.advance(249)
        await asyncio.sleep(0)
        assert not call.done()
        clock.advance(1)
        run = await call
        assert isinstance(run, Detached)
        assert (run.job, run.budget_ms) == (job.id, 250)
        assert run.output.text == "before\n"
        await session.writer.idle()
        assert nodes(session) == {job.id}
        assert not [e for e in session.entries() if e.kind == "notice"]
        with open(fifo, "w") as handle:
            handle.write("go\n")
        await poll_until(lambda: not job.running)
        await session.writer.idle()
        (row,) = [e for e in session.entries() if e.kind == "notice"]
        assert row.content["notice"] == "eukhe.bash"
        assert row.content["job"] == job.id
        assert row.content["exit_code"] == 0
        assert row.content["output"]["text"] == "before\nafter\n"
        assert nodes(session) == set()
        # within the budget it settles, and records its row too
        settled = asyncio.ensure_future(session.execute_bash_and_wait("echo quick", 250))
        done = await settled
        assert isinstance(done, Settled)
        assert done.exit_code == 0
        await session.writer.idle()
        rows = [e for e in session.entries() if e.kind == "notice"]
        assert [r.content["output"]["text"] for r in rows] == ["before\nafter\n", "quick\n"]
        await session.close()

    asyncio.run(scenario())


def test_the_session_budget_caps_execute_bash_and_wait_and_jobs_wait(tmp_path: Path) -> None:
    """S2 jobs 4: a blocking call waits within the session's `tool_blocking_budget_ms`: one asking for more, or for
    nothing, detaches at the session's budget (virtual clock: exact to the millisecond)."""

    async def scenario() -> None:
        clock = VirtualClock()
        work = tmp_path / "work"
        work.mkdir()
        session = await Session.create(
            work,
            root=tmp_path / "sessions",
            settings=SessionSettings(tool_blocking_budget_ms=SMALL_BUDGET_MS),
            bash_options=FAST,
            clock=clock,
        )
        try:
            runs: list[str] = []
            for asked in ASKED:
                call = asyncio.ensure_future(session.execute_bash_and_wait("echo started; sleep 60", asked))
                await poll_until(lambda: len(session.job_table.jobs()) == len(runs) + 1)  # running and waiting
                answer = await detaches_exactly_at_the_budget(clock, call)
                runs.append(answer.job)
            assert [job.id for job in session.job_table.running()] == runs
            for asked in ASKED:
                wait = asyncio.ensure_future(session.jobs.wait(runs[0], asked))
                await asyncio.sleep(0)  # the wait takes its deadline and waits
                answer = await detaches_exactly_at_the_budget(clock, wait)
                assert answer.job == runs[0]
            assert [job.id for job in session.job_table.running()] == runs
        finally:
            await session.close()

    asyncio.run(scenario())


def test_navigate_tree_stops_the_jobs_started_after_its_target(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        root = session.append("user", "one")
        before = await detach(session, "sleep 60")
        middle = session.append("assistant", "two")
        after = await detach(session, "sleep 60")
        later = await detach(session, "sleep 60")
        session.append("user", "three")
        rewound = await session.navigate_tree(middle.id)
        assert set(rewound.stopped_jobs) == {after, later}
        assert [j.id for j in session.jobs.list() if j.status == "running"] == [before]
        rewound = await session.navigate_tree(root.id)
        assert rewound.stopped_jobs == [before]
        with pytest.raises(UnknownEntryError):
            await session.navigate_tree("no-such-entry")
        again = await detach(session, "sleep 60")
        assert (await session.navigate_tree(None)).stopped_jobs == [again]
        assert session.leaf is None
        await session.close()
        # an entry from before the open comes before every job
        reopened = await Session.open(session.id, root=tmp_path / "sessions", bash_options=FAST)
        fresh = await detach(reopened, "sleep 60")
        assert (await reopened.navigate_tree(middle.id)).stopped_jobs == [fresh]
        await reopened.close()

    asyncio.run(scenario())


def test_jobs_list_wait_and_cancel(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        job = await detach(session, "echo hi; sleep 0.2; exit 3")
        waited = await session.jobs.wait(job, 5000)
        assert isinstance(waited, Settled)
        assert (waited.exit_code, waited.killed) == (3, False)
        assert waited.output.text == "hi\n"
        slow = await detach(session, "sleep 60")
        short = await session.jobs.wait(slow, 0)
        assert isinstance(short, Detached)
        assert session.jobs.list()[1].status == "running"
        assert [j.id for j in session.jobs.list()] == [job, slow]
        with pytest.raises(UnknownJobError):
            await session.jobs.wait("job-nope")
        await session.close()
        assert not session.job_table.running()

    asyncio.run(scenario())


def test_fork_copies_the_branch_through_a_private_staging_dir_and_stops_the_orphans(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        old_id = session.id
        first = session.append("user", "one")
        kept = await detach(session, "sleep 60")
        second = session.append("assistant", "two")
        orphan = await detach(session, "sleep 60")
        session.append("user", "three")
        await session.writer.idle()
        forked = await session.fork(second.id)
        assert forked.stopped_jobs == [orphan]
        assert (forked.session, forked.parent) != (old_id, old_id)
        assert forked.parent == old_id
        assert session.id == forked.session
        assert [e.id for e in session.branch()] == [first.id, second.id]
        assert nodes(session) == {kept}
        fork_dir = tmp_path / "sessions" / forked.session
        assert stat.S_IMODE(os.stat(fork_dir).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(fork_dir / "main.jsonl").st_mode) == 0o600
        assert not [p for p in (tmp_path / "sessions").iterdir() if p.name.startswith(".staging-")]
        session.append("user", "in the fork")
        await session.jobs.cancel(kept)
        await session.writer.idle()
        assert nodes(session) == set()
        await session.close()
        old = read_journal(tmp_path / "sessions" / old_id / "main.jsonl")
        assert not any(
            isinstance(r, EntryRecord) and r.content == "in the fork" for c in old.commits for r in c.records
        )
        # a fork to "none": before every entry, every running job stops
        again = await Session.open(old_id, root=tmp_path / "sessions", bash_options=FAST)
        late = await detach(again, "sleep 60")
        empty = await again.fork(None)
        assert empty.stopped_jobs == [late]
        assert again.entries() == []
        assert again.leaf is None
        await again.close()

    asyncio.run(scenario())


def test_a_job_that_goes_on_in_a_fork_ends_once_and_the_session_forked_from_does_not_record_it_again(
    tmp_path: Path,
) -> None:
    """The fork records the end of the jobs it takes over; the session forked from retires their nodes at the fork,
    with a row that says `forked`, so its reopen does not record them a second time as ended by their host (found by
    the soak: two end rows, the second with no output)."""

    async def scenario() -> None:
        session = await new_session(tmp_path)
        old_id = session.id
        session.append("user", "one")
        kept = await detach(session, "sleep 60")
        target = session.append("user", "two")
        orphan = await detach(session, "sleep 60")
        forked = await session.fork(target.id)
        assert forked.stopped_jobs == [orphan]
        await session.jobs.cancel(kept)
        await session.close()
        again = await Session.open(old_id, root=tmp_path / "sessions", bash_options=FAST)
        try:
            assert nodes(again) == set()
            rows = {row.id: row for row in again.jobs.list()}
            assert rows[kept].status == rows[orphan].status == "ended"
            assert rows[kept].reason == rows[orphan].reason == "forked"
            waited = await again.jobs.wait(kept, timeout_ms=0)
            assert (waited.killed, waited.exit_code) == (False, None)
        finally:
            await again.close()
        ends: dict[str, int] = {}
        for journal in (tmp_path / "sessions").glob("*/main.jsonl"):
            for commit in read_journal(journal).commits:
                for record in commit.records:
                    if isinstance(record, EntryRecord) and isinstance(record.content, dict):
                        job = record.content.get("job")
                        forked = record.content.get("reason") == "forked"
                        if isinstance(job, str) and "exit_code" in record.content and not forked:
                            ends[f"{job}@{record.id}"] = 1
        for job in (kept, orphan):
            assert len([key for key in ends if key.startswith(f"{job}@")]) == 1, (job, sorted(ends))

    asyncio.run(scenario())


def test_after_a_fork_a_rewind_to_an_entry_appended_in_the_fork_stops_exactly_the_jobs_started_after_it(
    tmp_path: Path,
) -> None:
    """The session object goes on in the fork: the entries it appends there are in the job table's rewind order
    (an entry the table never saw would come before every job, and a rewind to it would stop them all)."""

    async def scenario() -> None:
        session = await new_session(tmp_path)
        first = session.append("user", "one")
        before_fork = await detach(session, "sleep 60")
        second = session.append("assistant", "two")
        orphan = await detach(session, "sleep 60")
        forked = await session.fork(second.id)
        assert forked.stopped_jobs == [orphan]
        in_fork = session.append("user", "in the fork")
        after_in_fork = await detach(session, "sleep 60")
        later = session.append("assistant", "later in the fork")
        after_later = await detach(session, "sleep 60")

        def running() -> list[str]:
            return [job.id for job in session.jobs.list() if job.status == "running"]

        assert running() == [before_fork, after_in_fork, after_later]
        rewound = await session.navigate_tree(later.id)
        assert (rewound.stopped_jobs, rewound.stopping_jobs) == ([after_later], [])
        assert running() == [before_fork, after_in_fork]
        rewound = await session.navigate_tree(in_fork.id)
        assert (rewound.stopped_jobs, rewound.stopping_jobs) == ([after_in_fork], [])
        assert running() == [before_fork]
        rewound = await session.navigate_tree(second.id)  # copied into the fork; the job started before it
        assert rewound.stopped_jobs == []
        rewound = await session.navigate_tree(first.id)
        assert rewound.stopped_jobs == [before_fork]
        assert running() == []
        await session.close()

    asyncio.run(scenario())


def test_a_rewind_answers_the_jobs_not_ended_within_the_budget_as_stopping(tmp_path: Path) -> None:
    async def scenario() -> None:
        work = tmp_path / "work"
        work.mkdir()
        session = await Session.create(
            work,
            root=tmp_path / "sessions",
            settings=SessionSettings(tool_blocking_budget_ms=100),
            bash_options=BashOptions(kill_grace_ms=1000, drain_ms=50),
        )
        target = session.append("user", "one")
        stubborn = await detach(session, "trap '' TERM; echo ready; while :; do sleep 0.05; done")
        job = session.job_table.get(stubborn)
        assert job is not None
        await poll_until(lambda: job.snapshot().text == b"ready\n")
        rewound = await session.navigate_tree(target.id)
        assert rewound.stopping_jobs == [stubborn]
        assert rewound.stopped_jobs == []
        await poll_until(lambda: not job.running)  # SIGKILL after the grace ends it later
        assert job.end is not None
        await session.close()

    asyncio.run(scenario())


def test_close_settles_the_running_tool_calls_as_cancelled(tmp_path: Path) -> None:
    async def scenario() -> None:
        from eukhe.harness import ToolRegistration

        session = await new_session(tmp_path)
        started = asyncio.Event()

        async def execute(args: Any, api: Any) -> None:
            api.output("so far")
            started.set()
            await asyncio.Event().wait()

        session.harness.register(ToolRegistration("hang", NoToolArgs, execute))
        call = asyncio.ensure_future(session.harness.call("hang", {}, call_id="c1"))
        await started.wait()
        await session.close()
        result = await call
        assert result.status == "cancelled"
        assert result.output.text == "so far"
        reopened = await Session.open(session.id, root=tmp_path / "sessions")
        assert reopened.view_state().slots["c1"].outcome == "cancelled"
        await reopened.close()

    asyncio.run(scenario())
