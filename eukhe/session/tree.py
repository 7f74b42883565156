"""The session's two trees, folded from journal records (S1 minimal state tree; S2 "A tool call" 1, 5; jobs 5).

The entry tree holds the conversation: entries with an id and a parent id (user and assistant messages, tool
results, notices) and a current leaf. The state tree holds documents keyed by (type, key) under the root, created,
updated and retired by commits, plus each tool call's slot (`running`, then `done`). Everything here is a pure fold:
the same records always give the same trees, so the state just after any entry is the fold of the commits up to and
including the one that holds it.

Records (the `t` field names the kind; docs/session-format.md has the full format):
  session  the header (first commit): session id, working dir, settings, where it was forked from
  entry    a conversation entry; appending one moves the leaf to it
  leaf     the leaf moves to an existing entry, or to none (before every entry)
  doc      `put` creates or updates a document, `retire` removes it (retiring an absent one changes nothing)
  slot     a tool call's slot: `running` with its execute checkpoint, then `done` with its status
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eukhe.errors import EukheError

JSON = Any
ENTRY_KINDS = frozenset({"user", "assistant", "tool_result", "notice"})
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
    checkpoint: JSON
    outcome: str | None  # once done: "returned", "failed", "cancelled" or "interrupted"


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

    header: JSON = None
    entries: dict[str, Entry] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    leaf: str | None = None
    documents: dict[DocKey, JSON] = field(default_factory=dict)
    slots: dict[str, Slot] = field(default_factory=dict)

    def apply(self, seq: int, record: Mapping[str, JSON]) -> None:
        """Fold one record of commit `seq`; a record of an unknown kind is ignored (a newer eukhe wrote it)."""
        kind = record.get("t")
        if kind == "session":
            self.header = dict(record)
        elif kind == "entry":
            entry = Entry(record["id"], record.get("parent"), record["kind"], record.get("content"), seq)
            self.entries[entry.id] = entry
            self.order.append(entry.id)
            self.leaf = entry.id
        elif kind == "leaf":
            target = record.get("id")
            self.leaf = target if target is None or target in self.entries else self.leaf
        elif kind == "doc":
            key = (str(record["type"]), str(record["key"]))
            if record.get("op") == "put":
                self.documents[key] = record.get("value")
            elif record.get("op") == "retire":
                self.documents.pop(key, None)
        elif kind == "slot":
            call = str(record["call"])
            before = self.slots.get(call)
            self.slots[call] = Slot(
                call=call,
                tool=str(record.get("tool", before.tool if before else "")),
                status=str(record["status"]),
                args=record.get("args", before.args if before else None),
                checkpoint=record.get("checkpoint", before.checkpoint if before else None),
                outcome=record.get("outcome"),
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


def fold(commits: Iterable[tuple[int, Iterable[Mapping[str, JSON]]]]) -> Trees:
    """Fold (seq, records) pairs in order into the trees."""
    trees = Trees()
    for seq, records in commits:
        for record in records:
            trees.apply(seq, record)
    return trees


def state_after(commits: Iterable[tuple[int, Iterable[Mapping[str, JSON]]]], entry_id: str | None) -> StateView:
    """The committed state just after the commit holding `entry_id` (none: before every entry, the empty state)."""
    if entry_id is None:
        return StateView({}, {})
    trees = Trees()
    for seq, records in commits:
        found = False
        for record in records:
            trees.apply(seq, record)
            found = found or (record.get("t") == "entry" and record.get("id") == entry_id)
        if found:
            return trees.state()
    raise UnknownEntryError(entry_id)
