"""A journal and the trees folded from it, kept in step: the one place a session commits (S1 store).

`commit` makes the records one durable commit, then folds them, then tells the entry listeners (the job table's
rewind order) about each entry they hold, in that order: nothing is visible in memory that is not durable.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from eukhe.errors import UsageError
from eukhe.records.journal import ENTRY_KINDS, Commit, EntryKind, EntryRecord, JournalRecord
from eukhe.store.journal import Journal, JournalRead, read_journal
from eukhe.store.tree import Trees

JSON = Any


class Ledger:
    """The journal of one session and its folded trees."""

    def __init__(self, journal: Journal, trees: Trees, commits: list[tuple[int, tuple[JournalRecord, ...]]]) -> None:
        self.journal = journal
        self.trees = trees
        self.commits = commits
        self.entry_listeners: list[Callable[[str], None]] = []

    @classmethod
    def create(cls, path: Path) -> Ledger:
        """A new, empty journal at `path` (0600)."""
        return cls(Journal(path), Trees(), [])

    @classmethod
    def load(cls, path: Path, *, report: bool = True) -> tuple[Ledger, JournalRead]:
        """Read the journal at `path` once (skipping a torn line with a diagnostic on stderr), open it for commits."""
        read = read_journal(path)
        if report:
            for diagnostic in read.diagnostics:
                sys.stderr.write(f"eukhe: {path}:{diagnostic.line}: {diagnostic.reason}\n")
        commits = [(commit.seq, tuple(commit.records)) for commit in read.commits]
        trees = Trees()
        for seq, records in commits:
            for record in records:
                trees.apply(seq, record)
        next_seq = commits[-1][0] + 1 if commits else 1
        return cls(Journal(path, next_seq=next_seq), trees, commits), read

    def entry_record(self, kind: str, content: JSON) -> EntryRecord:
        """A new entry record with a fresh id; its parent is set at commit time to the leaf it follows."""
        if kind not in ENTRY_KINDS:
            raise UsageError(f"unknown entry kind {kind!r}; one of {sorted(ENTRY_KINDS)}")
        entry_id = secrets.token_hex(4)
        while entry_id in self.trees.entries:
            entry_id = secrets.token_hex(4)
        entry_kind: EntryKind = kind  # type: ignore[assignment]  # checked against ENTRY_KINDS above
        # Content is kept as plain JSON values (a record's snake_case keys), as a reopen reads it back.
        return EntryRecord(id=entry_id, parent=None, kind=entry_kind, content=msgspec.to_builtins(content))

    def commit(self, records: Sequence[JournalRecord], *, sync: bool = True) -> Commit:
        """One durable commit (JournalError: nothing happened; `sync=False`: see `Journal.commit`); then fold it;
        then tell the entry listeners."""
        leaf = self.trees.leaf
        placed: list[JournalRecord] = []
        for record in records:
            if isinstance(record, EntryRecord):
                placed.append(msgspec.structs.replace(record, parent=leaf) if record.parent is None else record)
                leaf = record.id
            else:
                placed.append(record)
        done = self.journal.commit(placed, sync=sync)
        self.commits.append((done.seq, tuple(done.records)))
        for record in done.records:
            self.trees.apply(done.seq, record)
        for record in done.records:
            if isinstance(record, EntryRecord):
                for listener in list(self.entry_listeners):
                    listener(record.id)
        return done

    def close(self) -> None:
        """Close the journal."""
        self.journal.close()
