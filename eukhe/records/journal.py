"""Journal records (S1 store; S2 "A tool call" 1, "Jobs" 5): what `main.jsonl` holds, one commit per line.

A commit is `{"seq": n, "records": [...]}`; each record names its kind in `t`. The first commit holds the session
header, whose `format` says which build wrote it: a journal of another format is refused, never half-read.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from eukhe.core.jobends import EndReason
from eukhe.records.base import Record
from eukhe.records.displays import Display
from eukhe.records.jobs import CellError, CellOutcomeName
from eukhe.records.output import OutputWindow
from eukhe.records.sandbox import SandboxPolicy
from eukhe.records.settings import KernelTransport, SessionSettings, TruncationSetting

JOURNAL_FORMAT = 2
"""The journal format this build writes and reads (format 1, of camelCase records, is refused like any other)."""

EntryKind = Literal["user", "assistant", "tool_result", "notice"]
ENTRY_KINDS: frozenset[str] = frozenset({"user", "assistant", "tool_result", "notice"})
CallOutcome = Literal["returned", "failed", "cancelled", "interrupted"]


class ForkOrigin(Record):
    """Where a fork came from: the session and the entry it was forked at (null: before every entry)."""

    session: str
    entry: str | None


class SessionHeader(Record, tag="session", tag_field="t"):
    """The first record of every journal: the format, the session id, its working dir, its settings, where it was
    forked from, the kernel transport it started with (null: Local), and its sandbox policy."""

    format: int
    id: str
    cwd: str
    settings: SessionSettings
    forked_from: ForkOrigin | None = None
    kernel_transport: KernelTransport | None = None
    sandbox: SandboxPolicy | None = None
    """The sandbox policy in force (null: a session made before policies, which runs unconfined)."""


class EntryRecord(Record, tag="entry", tag_field="t"):
    """A conversation entry; appending one moves the leaf to it."""

    id: str
    parent: str | None
    kind: EntryKind
    content: Any


class LeafRecord(Record, tag="leaf", tag_field="t"):
    """The leaf moves to an existing entry, or to none (before every entry)."""

    id: str | None


class DocPut(Record, tag="doc_put", tag_field="t"):
    """Create or update the state-tree document (type, key)."""

    type: str
    key: str
    value: Any


class DocRetire(Record, tag="doc_retire", tag_field="t"):
    """Remove the state-tree document (type, key); retiring an absent one changes nothing."""

    type: str
    key: str


class Checkpoint(Record):
    """What a crash recovery needs to find a running call's durable output: its artifact and its bound."""

    artifact_dir: str
    artifact_prefix: str
    truncation: TruncationSetting
    job: str | None = None
    """The job the call runs (its id chosen before the start is journaled): a crash settles the call from its end."""


class CallStart(Record, tag="call_start", tag_field="t"):
    """A tool call starts: its slot is `running`, with its checkpoint."""

    call: str
    tool: str
    args: dict[str, Any]
    checkpoint: Checkpoint
    at_ms: int | None = None
    """When it started (wall clock, ms since the epoch)."""


class CallSettle(Record, tag="call_settle", tag_field="t"):
    """A tool call settles: its slot is `done` (committed with its `tool_result` entry)."""

    call: str
    outcome: CallOutcome
    at_ms: int | None = None
    """When it settled (wall clock, ms since the epoch)."""


JournalRecord = SessionHeader | EntryRecord | LeafRecord | DocPut | DocRetire | CallStart | CallSettle


class Commit(Record):
    """One durable commit: its sequence number (1-based, in file order) and its records."""

    seq: int
    records: list[JournalRecord]


class ToolResultContent(Record):
    """The content of a `tool_result` entry: every result byte (bounded), every warning, all usage."""

    call: str
    tool: str
    status: CallOutcome
    output: OutputWindow
    details: Any
    warnings: list[str]
    usage: dict[str, int]
    usage_reports: list[dict[str, int]]


class BashRow(Record, tag="eukhe.bash", tag_field="notice"):
    """The `eukhe.bash` row a user-bash run records at its end (a `notice` entry); a reopen records it for a run that
    ended with its host (`killed`, `reason`). `started_ms` and `reason` are null in the rows of older builds."""

    job: str
    command: str
    exit_code: int | None
    killed: bool
    output: OutputWindow
    started_ms: int | None = None
    reason: EndReason | None = None


class JobEndRow(Record, tag="eukhe.job_end", tag_field="notice"):
    """The row any other job (a cell job) records at its end (a `notice` entry), as the `eukhe.bash` row does for a
    user bash: its end, its output, a cell's outcome; a reopen records it for a job that ended with its host."""

    job: str
    kind: str
    command: str
    started_ms: int
    exit_code: int | None
    killed: bool
    reason: EndReason | None
    output: OutputWindow
    outcome: CellOutcomeName | None = None
    result: str | None = None
    error: CellError | None = None
    displays: list[Display] = msgspec.field(default_factory=list)
    displays_notice: str | None = None
    displays_dropped: int = 0


class JobRecordFailed(Record, tag="job_record_failed", tag_field="notice"):
    """A job record the writer could not commit even alone (a `notice` entry)."""

    record: Literal["start", "end", "entry"]
    job: str | None
    kind: str | None
    reason: str
