"""The session's job writer task (S2 jobs 5): job starts and ends become `eukhe.job` nodes, in order, off the
callers' path.

Callers `submit` and go on; nobody waits for the writer. The task takes every record queued within BATCH_WINDOW_S of
the first (at once for a caller waiting in `idle`) as one batch and commits what `core.jobdocs.plan_batch` says (one
commit per batch; a batch that writes nothing commits nothing). A batch whose commit fails is retried one record at a
time; a record that fails alone becomes a `job_record_failed` notice in the conversation, and a job whose start
record fails alone is killed (`on_start_lost`): with no node, a reopen after a crash could not end its process group.
(On open, the session ends the jobs whose nodes an old process left: `Session.open`.)
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from eukhe.core.jobdocs import (
    JOB_DOC_TYPE,
    AppendEntry,
    JobEnded,
    JobStarted,
    PutNode,
    RetireNode,
    Write,
    WriterEntry,
    WriterRecord,
    plan_batch,
)
from eukhe.records.journal import Commit, DocPut, DocRetire, EntryRecord, JobRecordFailed, JournalRecord
from eukhe.store.journal import JournalError

JSON = Any


class CommitFunction(Protocol):
    """The session's commit: one commit of `records` (`sync=False`: without an fdatasync, durable with the next)."""

    def __call__(self, records: Sequence[JournalRecord], *, sync: bool = True) -> Commit: ...


BATCHES_KEPT = 64
BATCH_WINDOW_S = 0.002
"""The writer takes a batch this long after its first record, unless someone waits for it (`idle`). A commit's
fdatasync blocks the loop: so an answer that is ready goes out first, and records close in time share one commit (a
job that starts and ends within it commits no node). A batching delay, not a timeout of the model: on the loop's own
clock. A host that dies meanwhile loses these records, as it could before (nobody waits for the writer): the reopen
records its jobs as ended with it."""


def failure_notice(record: WriterRecord, reason: str) -> JobRecordFailed:
    """The `job_record_failed` notice that names a record the writer could not commit even alone."""
    if isinstance(record, JobStarted):
        return JobRecordFailed(record="start", job=record.job, kind=None, reason=reason)
    if isinstance(record, JobEnded):
        return JobRecordFailed(record="end", job=record.job, kind=None, reason=reason)
    return JobRecordFailed(record="entry", job=None, kind=record.kind, reason=reason)


class JobWriter:
    """Commits job records in order, a batch per commit, through the session's commit function."""

    def __init__(
        self,
        commit: CommitFunction,
        entry_record: Callable[[str, JSON], EntryRecord],
        nodes: Callable[[], frozenset[str]],
        on_start_lost: Callable[[str], None] | None = None,
    ) -> None:
        self._commit = commit
        self._entry_record = entry_record
        self._nodes = nodes
        self._on_start_lost = on_start_lost
        """Told the id of a job whose start record failed even alone: the session kills that job."""
        self._queue: list[WriterRecord] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._hurry = asyncio.Event()
        self._lazy = False
        """The next batch is written without an fdatasync (`idle(sync=False)`)."""
        self._task: asyncio.Task[None] | None = None
        # The last batches taken, for tests and diagnostics (bounded: a long-lived worker must not keep them all).
        self.batches: deque[tuple[WriterRecord, ...]] = deque(maxlen=BATCHES_KEPT)

    def start(self) -> None:
        """Start the task (in the running event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="eukhe-job-writer")

    def submit(self, record: WriterRecord) -> None:
        """Queue a record; returns at once."""
        self._queue.append(record)
        self._idle.clear()
        self._wake.set()

    async def idle(self, *, sync: bool = True) -> None:
        """Wait until every record submitted so far is committed (or reported as failed). `sync=False`: the batch
        this hurries is written without an fdatasync, for a caller whose own commit follows at once (a tool call's
        settle): that commit's fdatasync makes both durable, one instead of two."""
        if not self._idle.is_set():
            if not sync:
                self._lazy = True
            self._hurry.set()
        await self._idle.wait()

    async def close(self) -> None:
        """Commit what is queued, then stop the task."""
        await self.idle()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        # Invariant: the task outlives any batch (a fork and a close wait for `idle`: a dead writer held them
        # forever), and `idle` is set whenever the queue is empty.
        while True:
            await self._wake.wait()
            if not self._hurry.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._hurry.wait(), BATCH_WINDOW_S)
            self._wake.clear()
            batch, self._queue = tuple(self._queue), []
            sync, self._lazy = not self._lazy, False
            try:
                if batch:
                    self.batches.append(batch)
                    self._write_batch(batch, sync)
            except Exception as error:  # a bug must not stop the writer: later records still get written
                _say(f"eukhe: job writer could not write a batch: {error!r}")
            finally:
                if not self._queue:
                    self._idle.set()
                    self._hurry.clear()

    def _write_batch(self, batch: Sequence[WriterRecord], sync: bool) -> None:
        writes = plan_batch(self._nodes(), batch)
        if not writes:
            return
        try:
            self._commit(self._records(writes), sync=sync)
        except JournalError:
            for record in batch:
                self._write_alone(record)

    def _write_alone(self, record: WriterRecord) -> None:
        writes = plan_batch(self._nodes(), [record])
        if not writes:
            return
        try:
            self._commit(self._records(writes))
        except JournalError as error:
            notice = failure_notice(record, error.reason)
            try:
                self._commit([self._entry_record("notice", notice)])
            except JournalError as again:  # the conversation cannot take it either: say so where a person looks
                _say(f"eukhe: job record failed and its notice too: {notice} ({again.reason})")
            if isinstance(record, JobStarted) and self._on_start_lost is not None:
                self._on_start_lost(record.job)

    def _records(self, writes: Sequence[Write]) -> list[JournalRecord]:
        records: list[JournalRecord] = []
        for write in writes:
            if isinstance(write, PutNode):
                records.append(DocPut(type=JOB_DOC_TYPE, key=write.job, value=dict(write.document)))
            elif isinstance(write, RetireNode):
                records.append(DocRetire(type=JOB_DOC_TYPE, key=write.job))
            elif isinstance(write, AppendEntry):
                records.append(self._entry_record(write.kind, write.content))
        return records


def _say(text: str) -> None:
    """A diagnostic on stderr; a stderr that cannot take it (the log on the same full disk) loses it, nothing else."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


__all__ = ["JobEnded", "JobStarted", "JobWriter", "WriterEntry"]
