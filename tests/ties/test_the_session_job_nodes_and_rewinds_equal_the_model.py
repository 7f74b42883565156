"""Tie (S2 jobs 5-7, the parts the model leaves to tests): a real Session's job nodes, prompt and rewinds against a
plain model, step by step (Hypothesis stateful testing).

The model keeps the order of entry commits and job starts this process saw and the set of running jobs. After every
step, once the writer is idle: the session's `eukhe.job` nodes are exactly the running jobs; the prompt has its
`running-jobs` section exactly while one runs, naming each; a `navigate_tree` stops exactly the running jobs started
after its target (`core.job.rewind` on the model's order) and keeps every other. Jobs run under an in-process owner
that ends a job when told (or at once when killed), so the machine explores orders, not process timing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.core.job import Committed, Exited, Killed, Mark, Started, rewind
from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.jobs import Job, JobSpec
from eukhe.session import Session, SessionSettings


class InProcessOwner:
    """A job owner without a process: a kill ends the job at once, as killed."""

    def kill(self, job: Job) -> None:
        job.finish(Killed())


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.scratch = TemporaryDirectory()
        base = Path(self.scratch.name)
        (base / "work").mkdir()
        self.session: Session = self.run(
            Session.create(
                base / "work", root=base / "sessions", settings=SessionSettings(tool_blocking_budget_ms=1000)
            )
        )
        self.order: list[Mark] = []
        self.entries: list[str] = []
        self.running: dict[str, Job] = {}
        self.owner = InProcessOwner()

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    @rule(kind=st.sampled_from(["user", "assistant", "notice"]))
    def append(self, kind: str) -> None:
        entry = self.session.append(kind, "text")
        self.entries.append(entry.id)
        self.order.append(Committed(entry.id))

    @rule()
    def start_job(self) -> None:
        job = self.session.job_table.start(JobSpec("test", "work", DEFAULT_TRUNCATION), self.owner)
        self.running[job.id] = job
        self.order.append(Started(job.id))

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data())
    def end_job(self, data: st.DataObject) -> None:
        # In start order: job ids are random, so sorted ids would make a replayed draw pick another job (and
        # Hypothesis report a flaky strategy).
        job_id = data.draw(st.sampled_from(list(self.running)))
        assert self.running.pop(job_id).finish(Exited(0))

    @rule(data=st.data())
    def navigate(self, data: st.DataObject) -> None:
        target = data.draw(st.one_of(st.none(), st.sampled_from(self.entries)) if self.entries else st.none())
        verdict = rewind(self.order, set(self.running), target)
        result = self.run(self.session.navigate_tree(target))
        assert set(result.stopped_jobs) == set(verdict.stop)
        assert result.stopping_jobs == []
        for job_id in verdict.stop:
            del self.running[job_id]
        assert set(self.running) == set(verdict.keep)
        assert {job.id for job in self.session.job_table.running()} == set(verdict.keep)

    @rule()
    def settle_writer(self) -> None:
        self.run(self.session.writer.idle())
        nodes = set(self.session.view_state().of_type(JOB_DOC_TYPE))
        assert nodes == set(self.running)
        prompt = self.session.system_prompt()
        assert ("running-jobs" in prompt) == bool(nodes)
        assert all(job_id in prompt for job_id in nodes)

    @invariant()
    def the_table_agrees(self) -> None:
        assert {job.id for job in self.session.job_table.running()} == set(self.running)

    def teardown(self) -> None:
        self.run(self.session.close())
        self.loop.close()
        self.scratch.cleanup()


SessionMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=25, deadline=None)
test_the_session_job_nodes_and_rewinds_equal_the_model = SessionMachine.TestCase
