"""The session's two trees, folded from journal records (S1 minimal state tree; S2 "A tool call" 1, 5; jobs 5).

The entry tree holds the conversation: entries with an id and a parent id (user and assistant messages, tool
results, notices) and a current leaf. The state tree holds documents keyed by (type, key) under the root, created,
updated and retired by commits, plus each tool call's slot (`running`, then `done`). Everything here is a pure fold:
the same records always give the same trees, so the state just after any entry is the fold of the commits up to and
including the one that holds it.

Records (`eukhe.records.journal`; docs/session-format.md has the full format):
  session      the header (first commit): format, session id, working dir, settings, where it was forked from
  entry        a conversation entry; appending one moves the leaf to it
  leaf         the leaf moves to an existing entry, or to none (before every entry)
  doc_put      creates or updates a document; doc_retire removes it (retiring an absent one changes nothing)
  call_start   a tool call's slot is `running`, with its checkpoint; call_settle: `done`, with its outcome
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eukhe.errors import EukheError
from eukhe.records.journal import (
    CallSettle,
    CallStart,
    Checkpoint,
    DocPut,
    DocRetire,
    EntryRecord,
    JournalRecord,
    LeafRecord,
    SessionHeader,
)

JSON = Any
DocKey = tuple[str, str]


class UnknownEntryError(EukheError, KeyError):
    """An entry id names no entry of the session."""

    code = "unknown_entry"

    def __init__(self, entry_id: str) -> None:
        super().__init__(f"no entry {entry_id!r} in this session")
        self.entry_id = entry_id

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class Entry:
    """One conversation entry; `seq` is the commit that made it durable."""

    id: str
    parent: str | None
    kind: str
    content: JSON
    seq: int


@dataclass(frozen=True, slots=True)
class Slot:
    """A tool call's slot in the state tree; committed state only (no live output: that is on the board)."""

    call: str
    tool: str
    status: str  # "running" or "done"
    args: JSON
    checkpoint: Checkpoint
    outcome: str | None  # once done: "returned", "failed", "cancelled" or "interrupted"
    started_ms: int | None = None  # wall clock, ms since the epoch (None: a journal that did not record it)
    settled_ms: int | None = None


@dataclass(frozen=True, slots=True)
class StateView:
    """The committed state: documents by (type, key) and the tool call slots."""

    documents: Mapping[DocKey, JSON]
    slots: Mapping[str, Slot]

    def of_type(self, doc_type: str) -> dict[str, JSON]:
        """The documents of one type, by key."""
        return {key: value for (kind, key), value in self.documents.items() if kind == doc_type}


@dataclass(slots=True)
class Trees:
    """The folded trees of a journal (mutable while folding; read them through the view methods)."""

    header: SessionHeader | None = None
    entries: dict[str, Entry] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    leaf: str | None = None
    documents: dict[DocKey, JSON] = field(default_factory=dict)
    slots: dict[str, Slot] = field(default_factory=dict)

    def apply(self, seq: int, record: JournalRecord) -> None:
        """Fold one record of commit `seq`."""
        if isinstance(record, SessionHeader):
            self.header = record
        elif isinstance(record, EntryRecord):
            entry = Entry(record.id, record.parent, record.kind, record.content, seq)
            self.entries[entry.id] = entry
            self.order.append(entry.id)
            self.leaf = entry.id
        elif isinstance(record, LeafRecord):
            self.leaf = record.id if record.id is None or record.id in self.entries else self.leaf
        elif isinstance(record, DocPut):
            self.documents[(record.type, record.key)] = record.value
        elif isinstance(record, DocRetire):
            self.documents.pop((record.type, record.key), None)
        elif isinstance(record, CallStart):
            self.slots[record.call] = Slot(
                record.call, record.tool, "running", record.args, record.checkpoint, None, record.at_ms
            )
        elif isinstance(record, CallSettle):
            before = self.slots.get(record.call)
            if before is not None:
                self.slots[record.call] = Slot(
                    before.call,
                    before.tool,
                    "done",
                    before.args,
                    before.checkpoint,
                    record.outcome,
                    before.started_ms,
                    record.at_ms,
                )

    def state(self) -> StateView:
        """A frozen copy of the committed state."""
        return StateView(dict(self.documents), dict(self.slots))

    def path_to(self, entry_id: str | None) -> list[Entry]:
        """The entries from the root down to `entry_id` (none: empty)."""
        path: list[Entry] = []
        probe = entry_id
        while probe is not None:
            entry = self.entries.get(probe)
            if entry is None:
                raise UnknownEntryError(probe)
            path.append(entry)
            probe = entry.parent
        path.reverse()
        return path


def fold(commits: Iterable[tuple[int, Iterable[JournalRecord]]]) -> Trees:
    """Fold (seq, records) pairs in order into the trees."""
    trees = Trees()
    for seq, records in commits:
        for record in records:
            trees.apply(seq, record)
    return trees


def state_after(commits: Iterable[tuple[int, Iterable[JournalRecord]]], entry_id: str | None) -> StateView:
    """The committed state just after the commit holding `entry_id` (none: before every entry, the empty state)."""
    if entry_id is None:
        return StateView({}, {})
    trees = Trees()
    for seq, records in commits:
        found = False
        for record in records:
            trees.apply(seq, record)
            found = found or (isinstance(record, EntryRecord) and record.id == entry_id)
        if found:
            return trees.state()
    raise UnknownEntryError(entry_id)
