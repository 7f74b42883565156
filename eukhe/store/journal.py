"""The session journal `main.jsonl`: an append-only file of commits (S1 store, S2 "A tool call" 1).

One commit is one JSON line `{"seq": n, "records": [...]}` of typed records (`eukhe.records.journal`), written with a
single `write` on an `O_APPEND` descriptor and then `fdatasync`ed, so a commit is all there or, after a crash, a torn
last line. The reader decodes every line strictly; a torn line is skipped with a diagnostic, never fatal. A writer
whose journal ends in a torn line (left by a crash, or by a failed write of its own, e.g. on a full disk) starts its
next commit with a newline, so the torn bytes stay a line of their own and the commit reads whole.

The first line holds the session header; `read_header` reads only that line (the supervisor's way to learn a
session's working dir), and a header of another journal format is refused with `JournalFormatError`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from eukhe.errors import EukheError
from eukhe.fsio import write_all
from eukhe.private_fs import open_private_file
from eukhe.records.base import strict_json
from eukhe.records.journal import JOURNAL_FORMAT, CallStart, Commit, DocPut, EntryRecord, JournalRecord, SessionHeader

HEADER_LINE_LIMIT = 1 << 20
"""The longest first line `read_header` reads (a header is small; a longer line is not one)."""


class JournalError(EukheError):
    """A commit could not be made durable (encoding or I/O); nothing of it counts as committed."""

    code = "journal_error"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot commit to {path}: {reason}")
        self.path = path
        self.reason = reason


class JournalFormatError(EukheError):
    """The journal was written in another format (an older build's): it is refused, not half-read."""

    code = "journal_format"

    def __init__(self, path: Path, found: object) -> None:
        super().__init__(
            f"{path} is a session journal of format {found!r}; this build reads format {JOURNAL_FORMAT} only "
            f"(journals of the first builds used camelCase records). Start a new session; the old one stays on disk."
        )
        self.path = path
        self.found = found


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


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Commit)


def encode_commit(seq: int, records: Sequence[JournalRecord]) -> bytes:
    """The bytes of one commit: one JSON line (strict JSON, UTF-8), newline included. ValueError/TypeError if a
    record holds a value strict JSON cannot carry (NaN, infinity, a non-JSON object, text that is not UTF-8)."""
    return _ENCODER.encode(Commit(seq=seq, records=list(records))) + b"\n"


_NO_HEADER = object()


def _format_of(line: bytes) -> object:
    """The `format` a first line's session header names (None if it names none: the first builds'), or _NO_HEADER
    when the line holds no session header at all."""
    try:
        value = json.loads(line)
        header = value["records"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return _NO_HEADER
    if not isinstance(header, dict) or header.get("t") != "session":
        return _NO_HEADER
    return header.get("format")


def _other_format(line: bytes) -> bool:
    """Whether a first line that did not decode is the header of another journal format."""
    found = _format_of(line)
    return found is not _NO_HEADER and found != JOURNAL_FORMAT


def check_strict(records: Sequence[JournalRecord]) -> None:
    """ValueError if a record's free-form value (entry content, document value, call args) holds what strict JSON
    cannot carry: NaN or infinity (msgspec would write null), or a key that is not a string."""
    for record in records:
        if isinstance(record, EntryRecord):
            strict_json(record.content, "entry content")
        elif isinstance(record, DocPut):
            strict_json(record.value, "document value")
        elif isinstance(record, CallStart):
            strict_json(record.args, "call args")


def parse_journal(data: bytes, path: Path = Path("main.jsonl")) -> JournalRead:
    """Read every whole commit in `data`; a torn or unreadable line is skipped with a diagnostic. A first commit
    whose header is of another format raises JournalFormatError."""
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
            commit = _DECODER.decode(line)
        except msgspec.MsgspecError as error:
            if not commits and _other_format(line):
                raise JournalFormatError(path, _format_of(line)) from None
            diagnostics.append(Diagnostic(number, f"unreadable line: {error}", line[:80]))
            continue
        if not commits:
            _check_format(commit, path)
        commits.append(commit)
    return JournalRead(tuple(commits), tuple(diagnostics))


def _check_format(commit: Commit, path: Path) -> None:
    """A first commit whose header names another format: the journal is refused, whatever else it holds."""
    header = commit.records[0] if commit.records else None
    if isinstance(header, SessionHeader) and header.format != JOURNAL_FORMAT:
        raise JournalFormatError(path, header.format)


def read_journal(path: Path) -> JournalRead:
    """Read the journal at `path` (see `parse_journal`)."""
    with open(path, "rb") as handle:
        return parse_journal(handle.read(), path)


def read_header(path: Path) -> SessionHeader | None:
    """The session header of the journal at `path`, from its first line only (None: no readable header there).
    JournalFormatError if it is a header of another format."""
    with open(path, "rb") as handle:
        line = handle.readline(HEADER_LINE_LIMIT)
    if not line.endswith(b"\n"):
        return None
    try:
        commit = _DECODER.decode(line)
    except msgspec.MsgspecError:
        if _other_format(line):
            raise JournalFormatError(path, _format_of(line)) from None
        return None
    _check_format(commit, path)
    header = commit.records[0] if commit.records else None
    return header if isinstance(header, SessionHeader) else None


CommitObserver = Callable[[Commit], None]


class Journal:
    """The writing end of one `main.jsonl`: each `commit` is one write and one fdatasync, in order."""

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

    def commit(self, records: Sequence[JournalRecord]) -> Commit:
        """Append `records` as one commit and make it durable; raise JournalError and commit nothing on failure."""
        if self._fd < 0:
            raise JournalError(self.path, "journal is closed")
        seq = self._next_seq
        try:
            check_strict(records)
            data = encode_commit(seq, records)
        except (TypeError, ValueError, msgspec.EncodeError) as error:
            raise JournalError(self.path, f"cannot encode: {error}") from error
        self._before_write(records)
        try:
            self._write_all(b"\n" + data if self._torn else data)
        except OSError as error:
            self._torn = True  # part of the line may be on disk: never let the next commit join it
            raise JournalError(self.path, str(error)) from error
        self._torn = False
        self._next_seq = seq + 1
        done = Commit(seq=seq, records=list(records))
        for observer in list(self.observers):
            observer(done)
        return done

    def _before_write(self, records: Sequence[JournalRecord]) -> None:
        """A hook for fault-injection in tests (a journal whose disk refuses some records); does nothing here."""

    def _write_all(self, data: bytes) -> None:
        write_all(self._fd, data)  # a short write means the disk is full: the next write raises (ENOSPC, EFBIG)
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def records_of(commits: Iterable[Commit]) -> list[JournalRecord]:
    """Every record of `commits`, in order."""
    return [record for commit in commits for record in commit.records]
