"""Job records that outlive their process (S2 jobs 5), on a journal written by hand: what a reopen records
for each job node an earlier life left, and what `jobs.list`/`jobs.wait` answer for the jobs of earlier lives.

No process runs here: the nodes are the facts a dead host would have left (a boot id, a recorded stop, an artifact),
so each reason is read from exactly the fact that decides it. The real deaths are in tests/real/test_job_records*.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from eukhe.core.bound import On, OutputLimits
from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.jobs import JobSpec, JobTable
from eukhe.jobs.job import Job
from eukhe.procs import BOOT_ID_ENV
from eukhe.records.jobs import JobDocument, Settled
from eukhe.records.journal import DocPut, EntryRecord, JobEndRow
from eukhe.records.output import OutputWindow
from eukhe.session import Session, SessionSettings, UnknownJobError
from eukhe.store.journal import read_journal

SETTINGS = SessionSettings.bounded_by(On(OutputLimits(100, 1000)), tool_blocking_budget_ms=60_000)


def node(kind: str, command: str, boot: str | None, stop: str | None = None) -> dict[str, object]:
    return msgspec.to_builtins(
        JobDocument(kind=kind, command=command, started_ms=7, boot_id=boot, stop_reason=stop)  # type: ignore[arg-type]
    )


async def session_with_nodes(tmp_path: Path) -> Session:
    """A session whose journal holds what a dead host left: four job nodes, another document, one job's artifact."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    session = await Session.create(work, root=tmp_path / "s", session_id="old", settings=SETTINGS)
    session.commit(
        [
            DocPut(type=JOB_DOC_TYPE, key="job-died", value=node("bash", "sleep 1", "boot-a")),
            DocPut(type=JOB_DOC_TYPE, key="job-boot", value=node("bash", "sleep 2", "boot-old")),
            DocPut(type=JOB_DOC_TYPE, key="job-stop", value=node("cell", "loop()", "boot-a", "daemon_stopped")),
            DocPut(type=JOB_DOC_TYPE, key="job-older", value={"kind": "bash", "command": "old", "started_ms": 3}),
            DocPut(type="other", key="keep", value=1),
        ]
    )
    (session.artifact_dir / "job-job-died-0123.log").write_bytes(b"x" * 250 + b"\n" + b"tail\n")
    # The dead host never closed: its journal stays as it was (its writer's descriptor is simply dropped here).
    await session.writer.close()
    session.journal.close()
    return session


def test_a_reopen_records_each_left_job_as_killed_with_the_reason_its_facts_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BOOT_ID_ENV, "boot-a")

    async def scenario() -> None:
        await session_with_nodes(tmp_path)
        session = await Session.open("old", root=tmp_path / "s")
        assert session.view_state().of_type(JOB_DOC_TYPE) == {}
        assert session.view_state().of_type("other") == {"keep": 1}
        rows = {row.id: row for row in session.jobs.list()}
        assert list(rows) == ["job-died", "job-boot", "job-stop", "job-older"]  # the order they started
        reasons = {job: row.reason for job, row in rows.items()}
        assert reasons == {
            "job-died": "worker_died",
            "job-boot": "host_restart",
            "job-stop": "daemon_stopped",
            "job-older": "worker_died",  # a node of an older build: no boot id, no stop
        }
        for row in rows.values():
            assert (row.status, row.killed, row.exit_code) == ("ended", True, None)
        assert rows["job-stop"].kind == "cell"
        # The artifact's output stays with its job: every byte counted, the window bounded again.
        died = rows["job-died"]
        assert died.bytes_kept + died.bytes_dropped == 256
        assert died.bytes_kept <= 100
        answer = await session.jobs.wait("job-died")
        assert isinstance(answer, Settled)
        assert answer.reason == "worker_died"
        assert answer.output.artifact == str(session.artifact_dir / "job-job-died-0123.log")
        assert answer.output.text.endswith("tail\n")
        assert (await session.jobs.cancel("job-boot")).reason == "host_restart"  # ended: its end, at once
        cell = await session.jobs.wait("job-stop")
        assert isinstance(cell, Settled)
        assert cell.outcome == "killed"
        with pytest.raises(UnknownJobError):
            await session.jobs.wait("job-never")
        await session.close()

        # The rows are in the journal: one commit retired every node and recorded every row; a second reopen reads
        # the same jobs and records nothing more.
        commits = read_journal(tmp_path / "s" / "old" / "main.jsonl").commits
        rows_commit = commits[-1].records
        entries = [r for r in rows_commit if isinstance(r, EntryRecord)]
        assert [e.content["notice"] for e in entries] == ["eukhe.bash", "eukhe.bash", "eukhe.job_end", "eukhe.bash"]
        again = await Session.open("old", root=tmp_path / "s")
        assert [row.to_json() for row in again.jobs.list()] == [row.to_json() for row in rows.values()]
        await again.close()
        assert len(read_journal(tmp_path / "s" / "old" / "main.jsonl").commits) == len(commits)

    asyncio.run(scenario())


def test_the_rows_of_jobs_that_ended_in_an_earlier_life_answer_jobs_list_and_wait(tmp_path: Path) -> None:
    async def scenario() -> None:
        work = tmp_path / "work"
        work.mkdir()
        session = await Session.create(work, root=tmp_path / "s", session_id="rows", settings=SETTINGS)
        window = OutputWindow(
            text="hi\n", bytes_kept=3, bytes_dropped=0, lines_kept=1, lines_dropped=0, notice=None, artifact=None
        )
        session.commit([DocPut(type=JOB_DOC_TYPE, key="job-c", value=node("cell", "x = 1", None))])
        # A row as an older build wrote it: no start time, no reason.
        older = {"notice": "eukhe.bash", "job": "job-a", "command": "echo hi", "exit_code": 0, "killed": False}
        session.append("notice", {**older, "output": msgspec.to_builtins(window)})
        cell = JobEndRow(
            job="job-c",
            kind="cell",
            command="x = 1",
            started_ms=7,
            exit_code=0,
            killed=False,
            reason=None,
            output=window,
            outcome="ok",
            result="1",
        )
        session.append("notice", msgspec.to_builtins(cell))
        session.append("notice", {"notice": "settings", "message": "not a job row"})
        await session.close()

        again = await Session.open("rows", root=tmp_path / "s")
        rows = again.jobs.list()
        assert [(r.id, r.kind, r.status, r.exit_code, r.killed, r.reason) for r in rows] == [
            ("job-c", "cell", "ended", 0, False, None),
            ("job-a", "bash", "ended", 0, False, None),
        ]
        assert rows[0].started_ms == 7  # from its node
        answer = await again.jobs.wait("job-c")
        assert isinstance(answer, Settled)
        assert (answer.outcome, answer.result, answer.output.text) == ("ok", "1", "hi\n")
        await again.close()

    asyncio.run(scenario())


def test_a_new_job_never_takes_the_id_of_a_job_of_an_earlier_life() -> None:
    ids = iter(["job-x", "job-x", "job-y"])
    table = JobTable(new_id=lambda: next(ids))
    table.reserve({"job-x"})

    class Owner:
        def kill(self, job: Job) -> None:
            pass

    job = table.start(JobSpec("bash", "true", On(OutputLimits(10, 10))), Owner(), job_id="job-x")
    assert job.id == "job-y"


def test_a_fork_lists_the_past_jobs_whose_rows_its_branch_holds_as_its_reopen_does(tmp_path: Path) -> None:
    async def scenario() -> None:
        work = tmp_path / "work"
        work.mkdir()
        session = await Session.create(work, root=tmp_path / "s", session_id="p", settings=SETTINGS)
        before = session.append("user", "before")
        window = OutputWindow(
            text="", bytes_kept=0, bytes_dropped=0, lines_kept=0, lines_dropped=0, notice=None, artifact=None
        )
        row = {"notice": "eukhe.bash", "job": "job-a", "command": "true", "exit_code": 0, "killed": False}
        session.append("notice", {**row, "output": msgspec.to_builtins(window)})
        after = session.append("user", "after")
        await session.close()
        for target, listed in ((before.id, []), (after.id, ["job-a"])):
            parent = await Session.open("p", root=tmp_path / "s")
            assert [r.id for r in parent.jobs.list()] == ["job-a"]
            rewound = await parent.fork(target)
            assert [r.id for r in parent.jobs.list()] == listed  # the object goes on in the fork
            await parent.close()
            fork = await Session.open(rewound.session, root=tmp_path / "s")
            assert [r.id for r in fork.jobs.list()] == listed
            await fork.close()

    asyncio.run(scenario())
