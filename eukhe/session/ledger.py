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

from eukhe.errors import UsageError
from eukhe.session.journal import Commit, Journal, JournalRead, Record, read_journal
from eukhe.session.tree import ENTRY_KINDS, Trees

JSON = Any


class Ledger:
    """The journal of one session and its folded trees."""

    def __init__(self, journal: Journal, trees: Trees, commits: list[tuple[int, tuple[Record, ...]]]) -> None:
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
        """Read the journal at `path` (skipping a torn line with a diagnostic on stderr) and open it for commits."""
        read = read_journal(path)
        if report:
            for diagnostic in read.diagnostics:
                sys.stderr.write(f"eukhe: {path}:{diagnostic.line}: {diagnostic.reason}\n")
        commits = [(commit.seq, commit.records) for commit in read.commits]
        trees = Trees()
        for seq, records in commits:
            for record in records:
                trees.apply(seq, record)
        next_seq = commits[-1][0] + 1 if commits else 1
        return cls(Journal(path, next_seq=next_seq), trees, commits), read

    def entry_record(self, kind: str, content: JSON) -> dict[str, JSON]:
        """A new entry record with a fresh id; its parent is set at commit time to the leaf it follows."""
        if kind not in ENTRY_KINDS:
            raise UsageError(f"unknown entry kind {kind!r}; one of {sorted(ENTRY_KINDS)}")
        entry_id = secrets.token_hex(4)
        while entry_id in self.trees.entries:
            entry_id = secrets.token_hex(4)
        return {"t": "entry", "id": entry_id, "kind": kind, "content": content}

    def commit(self, records: Sequence[Record]) -> Commit:
        """One durable commit (JournalError: nothing happened); then fold it; then tell the entry listeners."""
        leaf = self.trees.leaf
        placed: list[Record] = []
        for record in records:
            if record.get("t") == "entry":
                placed.append(record if "parent" in record else {**record, "parent": leaf})
                leaf = record["id"]
            else:
                placed.append(record)
        done = self.journal.commit(placed)
        self.commits.append((done.seq, done.records))
        for record in done.records:
            self.trees.apply(done.seq, record)
        for record in done.records:
            if record.get("t") == "entry":
                for listener in list(self.entry_listeners):
                    listener(str(record["id"]))
        return done

    def close(self) -> None:
        """Close the journal."""
        self.journal.close()
