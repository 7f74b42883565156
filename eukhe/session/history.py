"""The jobs of a session's earlier lives (S2 "Jobs" 5): their rows, read back from the journal, and the
rows a reopen records for the jobs that ended with their host.

Every job's end records a row, a `notice` entry: the `eukhe.bash` row of a user bash, the `eukhe.job_end` row of any
other job (a cell job). A job's node (`eukhe.job`) holds what it runs, when it started, the boot id of its host and,
once its host began a clean stop, that stop's reason. On open, each node the history left belongs to a job that
ended with its host: the reopen retires it and records its row (killed, the reason `core.jobends` reads from those
facts, and every byte its host read of its output: its spill file's, bounded again). Then `jobs.list`, `jobs.wait`
and `jobs.cancel` answer for every job the journal names, folded by `core.jobends.past_jobs`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.core.jobends import (
    EndReason,
    EndRecorded,
    GroupMark,
    HistoryFact,
    LeftNode,
    NodePut,
    NodeRetired,
    PastJob,
    ReopenedEnd,
)
from eukhe.harness.harness import durable_output
from eukhe.jobs import Job
from eukhe.jobs.job import end_fields
from eukhe.output import job_artifact_prefix
from eukhe.records.jobs import JobDocument, JobRow, Settled
from eukhe.records.journal import BashRow, Checkpoint, DocPut, DocRetire, EntryRecord, JobEndRow, JournalRecord
from eukhe.records.output import OutputWindow
from eukhe.records.settings import TruncationSetting

EndRow = BashRow | JobEndRow
"""A job's end row: `eukhe.bash` for a user bash, `eukhe.job_end` for any other job."""

END_ROW_NOTICES = frozenset({"eukhe.bash", "eukhe.job_end"})
NO_OUTPUT = OutputWindow(
    text="", bytes_kept=0, bytes_dropped=0, lines_kept=0, lines_dropped=0, notice=None, artifact=None
)
"""The output of a past job whose end the journal does not hold: none known."""


def node_document(value: Any) -> JobDocument | None:
    """A job node's value as its record (None: not one, e.g. written by hand)."""
    try:
        return msgspec.convert(value, JobDocument)
    except msgspec.ValidationError:
        return None


def end_row_of(content: Any) -> EndRow | None:
    """A notice entry's content as a job's end row (None: another notice, or not one this build reads)."""
    if not isinstance(content, dict) or content.get("notice") not in END_ROW_NOTICES:
        return None
    try:
        row: EndRow = msgspec.convert(content, EndRow)  # a tagged union of records
        return row
    except msgspec.ValidationError:
        return None


def _kind(row: EndRow) -> str:
    return "bash" if isinstance(row, BashRow) else row.kind


def history_facts(records: Iterable[JournalRecord]) -> list[HistoryFact[EndRow]]:
    """The journal's job facts in commit order: nodes put and retired, end rows recorded."""
    facts: list[HistoryFact[EndRow]] = []
    for record in records:
        if isinstance(record, DocPut) and record.type == JOB_DOC_TYPE:
            document = node_document(record.value)
            if document is not None:
                facts.append(NodePut(record.key, document.kind, document.command, document.started_ms))
        elif isinstance(record, DocRetire) and record.type == JOB_DOC_TYPE:
            facts.append(NodeRetired(record.key))
        elif isinstance(record, EntryRecord) and record.kind == "notice":
            row = end_row_of(record.content)
            if row is not None:
                facts.append(EndRecorded(row.job, _kind(row), row.command, row.started_ms, row))
    return facts


def past_row(past: PastJob[EndRow]) -> JobRow:
    """A past job as `jobs.list` shows it: its counts are its end row's window's."""
    row = past.end
    output = NO_OUTPUT if row is None else row.output
    return JobRow(
        id=past.job,
        kind=past.kind,
        command=past.command,
        status="ended" if past.ended else "running",
        started_ms=past.started_ms,
        bytes_kept=output.bytes_kept,
        bytes_dropped=output.bytes_dropped,
        lines_kept=output.lines_kept,
        lines_dropped=output.lines_dropped,
        exit_code=None if row is None else row.exit_code,
        killed=False if row is None else row.killed,
        reason=None if row is None else row.reason,
    )


def past_answer(past: PastJob[EndRow]) -> Settled:
    """A past job's answer to `jobs.wait` or `jobs.cancel`, at once: its end and its output, from its end row."""
    row = past.end
    cell = row if isinstance(row, JobEndRow) else None
    return Settled(
        job=past.job,
        kind=past.kind,
        command=past.command,
        exit_code=None if row is None else row.exit_code,
        killed=False if row is None else row.killed,
        output=NO_OUTPUT if row is None else row.output,
        outcome=None if cell is None else cell.outcome,
        result=None if cell is None else cell.result,
        error=None if cell is None else cell.error,
        reason=None if row is None else row.reason,
        displays=[] if cell is None else list(cell.displays),
        displays_notice=None if cell is None else cell.displays_notice,
        displays_dropped=0 if cell is None else cell.displays_dropped,
    )


def end_row(job: Job) -> EndRow:
    """The row a job of this life records at its end."""
    window = job.result().to_record()
    exit_code, killed = end_fields(job.end)
    if job.spec.kind == "bash":
        return BashRow(
            job=job.id,
            command=job.spec.command,
            exit_code=exit_code,
            killed=killed,
            output=window,
            started_ms=job.started_ms,
            reason=job.reason,
        )
    cell = job.cell
    return JobEndRow(
        job=job.id,
        kind=job.spec.kind,
        command=job.spec.command,
        started_ms=job.started_ms,
        exit_code=exit_code,
        killed=killed,
        reason=job.reason,
        output=window,
        outcome=None if cell is None else cell.outcome,
        result=None if cell is None else cell.result,
        error=None if cell is None else cell.error,
        displays=[] if cell is None else list(cell.displays),
        displays_notice=None if cell is None else cell.displays_notice,
        displays_dropped=0 if cell is None else cell.displays_dropped,
    )


def left_node(job_id: str, value: Any) -> LeftNode:
    """The facts a reopen reads from a node the history left (a node it cannot read: no stop, no boot, no group)."""
    document = node_document(value)
    if document is None:
        return LeftNode(job_id, None, None)
    group = None
    if document.process_group is not None and document.process_start is not None and document.process_mark:
        group = GroupMark(document.process_group, document.process_start, document.process_mark)
    return LeftNode(job_id, document.stop_reason, document.boot_id, group)


def reopened_row(
    end: ReopenedEnd, value: Any, artifact_dir: Path, truncation: TruncationSetting
) -> tuple[DocRetire, EndRow]:
    """What a reopen commits for a job that ended with its host: its node retired, and its row (killed, the reason,
    the output its spill file holds, `job-<id>-*` in the artifact dir: every byte its host read, bounded again under
    the session's truncation, with exact counts; none when it wrote nothing)."""
    checkpoint = Checkpoint(
        artifact_dir=str(artifact_dir), artifact_prefix=job_artifact_prefix(end.job), truncation=truncation
    )
    window = durable_output(checkpoint, "job ended with its host").to_record()
    row = _end_row(end.job, value, exit_code=end.exit_code, killed=end.killed, reason=end.reason, output=window)
    return DocRetire(type=JOB_DOC_TYPE, key=end.job), row


def forked_row(job_id: str, value: Any) -> tuple[DocRetire, EndRow]:
    """What a session that forks commits for a job still running, which goes on (or is stopped) in the fork: its
    node retired and a row with reason `forked` and no output (the fork records the job's real end)."""
    row = _end_row(job_id, value, exit_code=None, killed=False, reason="forked", output=NO_OUTPUT)
    return DocRetire(type=JOB_DOC_TYPE, key=job_id), row


def _end_row(
    job_id: str, value: Any, *, exit_code: int | None, killed: bool, reason: EndReason, output: OutputWindow
) -> EndRow:
    """A job's end row from its node's value (a bash row for a bash job)."""
    document = node_document(value) or JobDocument(kind="job", command="", started_ms=0)
    if document.kind == "bash":
        return BashRow(
            job=job_id,
            command=document.command,
            exit_code=exit_code,
            killed=killed,
            output=output,
            started_ms=document.started_ms,
            reason=reason,
        )
    return JobEndRow(
        job=job_id,
        kind=document.kind,
        command=document.command,
        started_ms=document.started_ms,
        exit_code=exit_code,
        killed=killed,
        reason=reason,
        output=output,
        outcome="killed" if document.kind == "cell" and killed else None,
    )
