"""The job writer task on a real journal (S2 jobs 5): batches, one-by-one retry, `job_record_failed`."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eukhe.core.jobdocs import JOB_DOC_TYPE, JobEnded, JobStarted, WriterEntry
from eukhe.records.journal import Commit, DocRetire, EntryRecord, JournalRecord
from eukhe.session.writer import BATCHES_KEPT, JobWriter
from eukhe.store.journal import Journal, JournalError
from eukhe.store.ledger import Ledger
from eukhe.store.tree import Trees


class RefusingJournal(Journal):
    """A disk that refuses any commit holding a record for one job, or every commit for "*" (a test double for our
    own journal)."""

    refused_job = ""

    def _before_write(self, records: Sequence[JournalRecord]) -> None:
        if self.refused_job == "*" or any(getattr(r, "key", None) == self.refused_job for r in records):
            raise JournalError(self.path, f"refused {self.refused_job}")


def make(tmp_path: Path, lost: list[str] | None = None) -> tuple[Ledger, JobWriter, list[Commit]]:
    ledger = Ledger(RefusingJournal(tmp_path / "main.jsonl"), Trees(), [])
    writer = JobWriter(
        ledger.commit,
        ledger.entry_record,
        lambda: frozenset(k for (t, k) in ledger.trees.documents if t == JOB_DOC_TYPE),
        on_start_lost=None if lost is None else lost.append,
    )
    commits: list[Commit] = []
    ledger.journal.observers.append(commits.append)
    return ledger, writer, commits


def test_records_commit_in_order_a_batch_per_commit_and_nobody_waits(tmp_path: Path) -> None:
    async def scenario() -> None:
        ledger, writer, commits = make(tmp_path)
        writer.start()
        writer.submit(JobStarted("a", {"title": "x"}))
        writer.submit(JobStarted("b", {"title": "y"}))
        assert commits == []  # submit returned before anything was written
        await writer.idle()
        assert len(commits) == 1
        assert [getattr(r, "key", None) for r in commits[0].records] == ["a", "b"]
        writer.submit(JobEnded("a"))
        writer.submit(WriterEntry("notice", {"notice": "eukhe.bash", "job": "a"}))
        await writer.idle()
        assert [type(r) for r in commits[1].records] == [DocRetire, EntryRecord]
        assert set(ledger.trees.documents) == {(JOB_DOC_TYPE, "b")}
        await writer.close()
        ledger.close()

    asyncio.run(scenario())


def test_a_job_that_starts_and_ends_in_one_batch_commits_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        ledger, writer, commits = make(tmp_path)
        writer.start()
        writer.submit(JobStarted("a", {}))
        writer.submit(JobEnded("a"))
        await writer.idle()
        assert commits == []
        assert list(writer.batches) == [(JobStarted("a", {}), JobEnded("a"))]
        writer.submit(JobEnded("ghost"))  # an end whose node is absent retires nothing
        await writer.idle()
        assert commits == []
        await writer.close()
        ledger.close()

    asyncio.run(scenario())


def test_records_within_the_batch_window_share_one_commit_and_a_waiter_hurries_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A start, then its end one loop turn later (the writer is awake by then): one batch, nothing committed (a job
    that ends within the window writes no node); its row then waits out the window, unless someone waits in `idle`.
    The window is made an hour long here: only the hurry can end this test."""
    monkeypatch.setattr("eukhe.session.writer.BATCH_WINDOW_S", 3600.0)

    async def scenario() -> None:
        ledger, writer, commits = make(tmp_path)
        writer.start()
        writer.submit(JobStarted("a", {}))
        for _ in range(5):
            await asyncio.sleep(0)  # loop turns: the writer has woken and is in its window
        writer.submit(JobEnded("a"))
        writer.submit(WriterEntry("notice", {"notice": "eukhe.bash", "job": "a"}))
        for _ in range(5):
            await asyncio.sleep(0)
        assert commits == []  # still in the window
        await asyncio.wait_for(writer.idle(), 30)  # the waiter hurries it
        assert list(writer.batches) == [
            (JobStarted("a", {}), JobEnded("a"), WriterEntry("notice", {"notice": "eukhe.bash", "job": "a"}))
        ]
        assert [[type(r) for r in c.records] for c in commits] == [[EntryRecord]]
        await writer.close()
        ledger.close()

    asyncio.run(scenario())


def test_a_failed_batch_is_retried_one_record_at_a_time_and_a_lone_failure_becomes_a_notice(tmp_path: Path) -> None:
    async def scenario() -> None:
        lost: list[str] = []
        ledger, writer, commits = make(tmp_path, lost)
        journal = ledger.journal
        assert isinstance(journal, RefusingJournal)
        journal.refused_job = "bad"
        writer.start()
        writer.submit(JobStarted("good", {}))
        writer.submit(JobStarted("bad", {}))
        writer.submit(JobStarted("other", {}))
        await writer.idle()
        assert len(writer.batches) == 1
        assert [[getattr(r, "key", None) or r.content["notice"] for r in c.records] for c in commits] == [
            ["good"],
            ["job_record_failed"],
            ["other"],
        ]
        assert lost == ["bad"], "the session is told of a start that failed alone, and of no other"
        notice = commits[1].records[0]
        assert isinstance(notice, EntryRecord)
        assert notice.kind == "notice"
        assert notice.content["record"] == "start"
        assert notice.content["job"] == "bad"
        writer.submit(JobEnded("bad"))  # its node is absent: retires nothing, commits nothing
        await writer.idle()
        assert len(commits) == 3
        assert set(ledger.trees.documents) == {(JOB_DOC_TYPE, "good"), (JOB_DOC_TYPE, "other")}
        await writer.close()
        ledger.close()

    asyncio.run(scenario())


def test_the_writer_keeps_only_its_last_batches(tmp_path: Path) -> None:
    async def scenario() -> None:
        ledger, writer, _ = make(tmp_path)
        writer.start()
        for n in range(BATCHES_KEPT + 5):
            writer.submit(JobEnded(f"ghost-{n}"))
            await writer.idle()
        assert len(writer.batches) == BATCHES_KEPT
        assert writer.batches[-1] == (JobEnded(f"ghost-{BATCHES_KEPT + 4}"),)
        await writer.close()
        ledger.close()

    asyncio.run(scenario())


def test_the_writer_outlives_a_full_disk_under_its_own_diagnostics(tmp_path: Path, monkeypatch: Any) -> None:
    """Every commit fails and so does stderr (the daemon log on the same full disk; /dev/full here, for real): the
    writer goes on, and `idle` (a fork, a close) returns. It used to die, and every later fork or close of the
    session waited for it forever (found by bench/soak.py)."""

    async def scenario() -> None:
        ledger, writer, _ = make(tmp_path)
        ledger.journal.refused_job = "*"  # type: ignore[attr-defined]
        writer.start()
        full = open("/dev/full", "w", buffering=1)  # noqa: SIM115  (its close fails too: what it could not write)
        monkeypatch.setattr(sys, "stderr", full)
        try:
            for round_ in range(2):
                writer.submit(JobStarted("a", {"title": str(round_)}))
                await asyncio.wait_for(writer.idle(), 10)
        finally:
            monkeypatch.undo()
            with contextlib.suppress(OSError):
                full.close()
        ledger.journal.refused_job = ""  # type: ignore[attr-defined]
        writer.submit(JobStarted("b", {"title": "after"}))
        await asyncio.wait_for(writer.idle(), 10)
        assert (JOB_DOC_TYPE, "b") in ledger.trees.documents
        await writer.close()
        ledger.close()

    asyncio.run(scenario())


class SyncRecordingJournal(RefusingJournal):
    """The journal, noting whether each write it made was fdatasynced."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.syncs: list[bool] = []

    def _write_all(self, data: bytes, *, sync: bool) -> None:
        self.syncs.append(sync)
        super()._write_all(data, sync=sync)


def test_a_batch_hurried_for_a_commit_that_follows_is_written_without_an_fdatasync_of_its_own(tmp_path: Path) -> None:
    async def scenario() -> None:
        journal = SyncRecordingJournal(tmp_path / "main.jsonl")
        ledger = Ledger(journal, Trees(), [])
        writer = JobWriter(ledger.commit, ledger.entry_record, frozenset)
        writer.start()
        writer.submit(WriterEntry("notice", {"notice": "eukhe.bash", "job": "a"}))
        await writer.idle(sync=False)  # a tool call's settle commits next: its fdatasync covers this write
        assert journal.syncs == [False]
        writer.submit(WriterEntry("notice", {"notice": "eukhe.bash", "job": "b"}))
        await writer.idle()  # nobody commits after it: the batch has its own fdatasync
        assert journal.syncs == [False, True]
        await writer.close()
        ledger.close()

    asyncio.run(scenario())
