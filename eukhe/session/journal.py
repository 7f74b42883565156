"""The session journal `main.jsonl`: an append-only file of commits (S1 store, S2 "A tool call" 1).

One commit is one JSON line `{"seq": n, "records": [...]}`, written with a single `write` on an `O_APPEND`
descriptor and then `fsync`ed, so a commit is all there or, after a crash, a torn last line. The reader skips a
line it cannot parse with a diagnostic and never fails on one. A writer whose journal ends in a torn line (left by a
crash, or by a failed write of its own, e.g. on a full disk) starts its next commit with a newline, so the torn
bytes stay a line of their own and the commit reads whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eukhe.errors import EukheError
from eukhe.private_fs import open_private_file

JSON = Any
Record = Mapping[str, JSON]


class JournalError(EukheError):
    """A commit could not be made durable (encoding or I/O); nothing of it counts as committed."""

    code = "journal_error"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot commit to {path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Commit:
    """One durable commit: its sequence number (1-based, in file order) and its records."""

    seq: int
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A line the reader skipped: its 1-based line number, why, and the first bytes of it."""

    line: int
    reason: str
    head: bytes


@dataclass(frozen=True, slots=True)
class JournalRead:
    """What a journal file holds: the commits in order and the lines skipped."""

    commits: tuple[Commit, ...]
    diagnostics: tuple[Diagnostic, ...]


def encode_commit(seq: int, records: Sequence[Record]) -> bytes:
    """The bytes of one commit: one JSON line (strict JSON, UTF-8), newline included."""
    text = json.dumps(
        {"seq": seq, "records": list(records)}, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )
    return text.encode("utf-8") + b"\n"


def parse_journal(data: bytes) -> JournalRead:
    """Read every whole commit in `data`; a torn or unreadable line is skipped with a diagnostic."""
    commits: list[Commit] = []
    diagnostics: list[Diagnostic] = []
    lines = data.split(b"\n")
    last = len(lines) - 1  # the piece after the final newline: empty unless the last line is torn
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        number = index + 1
        if index == last:
            diagnostics.append(Diagnostic(number, "torn last line (no newline): ignored", line[:80]))
            continue
        try:
            value = json.loads(line)
        except (ValueError, UnicodeDecodeError) as error:
            diagnostics.append(Diagnostic(number, f"unreadable line: {error}", line[:80]))
            continue
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("seq"), int)
            or not isinstance(value.get("records"), list)
            or not all(isinstance(record, dict) for record in value["records"])
        ):
            diagnostics.append(Diagnostic(number, "not a commit object", line[:80]))
            continue
        commits.append(Commit(value["seq"], tuple(value["records"])))
    return JournalRead(tuple(commits), tuple(diagnostics))


def read_journal(path: Path) -> JournalRead:
    """Read the journal at `path` (see `parse_journal`)."""
    with open(path, "rb") as handle:
        return parse_journal(handle.read())


CommitObserver = Callable[[Commit], None]


class Journal:
    """The writing end of one `main.jsonl`: each `commit` is one write and one fsync, in order."""

    def __init__(self, path: Path, *, next_seq: int = 1) -> None:
        self.path = path
        self._fd = open_private_file(path, os.O_RDWR | os.O_APPEND)
        self._next_seq = next_seq
        self.observers: list[CommitObserver] = []
        size = os.fstat(self._fd).st_size
        # A torn last line from a crash: the next commit ends it first, so it stays one skipped line and the commit
        # reads whole. A failed write in this process may leave one too (a full disk writes part of a line).
        self._torn = bool(size) and os.pread(self._fd, 1, size - 1) != b"\n"

    @property
    def next_seq(self) -> int:
        """The sequence number the next commit gets."""
        return self._next_seq

    def commit(self, records: Sequence[Record]) -> Commit:
        """Append `records` as one commit and make it durable; raise JournalError and commit nothing on failure."""
        if self._fd < 0:
            raise JournalError(self.path, "journal is closed")
        seq = self._next_seq
        try:
            data = encode_commit(seq, records)
        except (TypeError, ValueError) as error:  # not JSON, or text that is not UTF-8 (lone surrogates)
            raise JournalError(self.path, f"cannot encode: {error}") from error
        self._before_write(records)
        try:
            self._write_all(b"\n" + data if self._torn else data)
        except OSError as error:
            self._torn = True  # part of the line may be on disk: never let the next commit join it
            raise JournalError(self.path, str(error)) from error
        self._torn = False
        self._next_seq = seq + 1
        done = Commit(seq, tuple(records))
        for observer in list(self.observers):
            observer(done)
        return done

    def _before_write(self, records: Sequence[Record]) -> None:
        """A hook for fault-injection in tests (a journal whose disk refuses some records); does nothing here."""

    def _write_all(self, data: bytes) -> None:
        # A short write on a regular file means the disk is full: the next write raises (ENOSPC, EFBIG).
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def records_of(commits: Iterable[Commit]) -> list[Record]:
    """Every record of `commits`, in order."""
    return [record for commit in commits for record in commit.records]
