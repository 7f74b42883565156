"""The session journal `main.jsonl`: an append-only file of commits (S1 store, S2 "A tool call" 1).

One commit is one JSON line `{"seq": n, "records": [...]}` of typed records (`eukhe.records.journal`), written with a
single `pwrite` just past the last commit and then `fdatasync`ed, so a commit is all there or, after a crash, a torn
last line. The writer keeps zeros written ahead of its commits (preallocated space, cut off by a clean close), so a
commit's fdatasync flushes its own bytes and no metadata; the reader ignores the zeros at the end of the file (JSON
never holds a NUL byte). The reader decodes every line strictly; a torn line is skipped with a diagnostic, never
fatal. A writer whose journal ends in a torn line (left by a crash, or by a failed write of its own, e.g. on a full
disk) starts its next commit with a newline, so the torn bytes stay a line of their own and the commit reads whole.

The first line holds the session header; `read_header` reads only that line (the supervisor's way to learn a
session's working dir), and a header of another journal format is refused with `JournalFormatError`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from eukhe.errors import EukheError
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
    lines = data.rstrip(b"\0").split(b"\n")  # the zeros a writer preallocated are no line
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

PREALLOCATE_MIN = 64 << 10
"""The first zeroed stretch a journal gets, and the least it grows by."""
PREALLOCATE_MAX = 1 << 20
"""The most a journal grows by at once (it grows by its own size until then)."""
_SCAN = 64 << 10


def content_end(fd: int, size: int) -> int:
    """Where the commits of the file `fd` (of `size` bytes) end: just past its last byte that is not NUL. The rest is
    the zeroed space a writer preallocated (JSON text never holds a NUL byte)."""
    end = size
    while end > 0:
        start = max(0, end - _SCAN)
        kept = len(os.pread(fd, end - start, start).rstrip(b"\0"))
        if kept:
            return start + kept
        end = start
    return 0


class Journal:
    """The writing end of one `main.jsonl`: each `commit` is one write and one fdatasync, in order.

    The file is kept longer than its commits, by zeros written ahead (`_preallocate`): a commit overwrites zeros
    already on disk, so its `fdatasync` flushes the commit's data alone, never the file's size or block map (on
    ext4 an append costs a journal commit of the inode besides). A clean `close` cuts the zeros off; after a crash
    they stay, and the reader ignores them (`parse_journal`)."""

    def __init__(self, path: Path, *, next_seq: int = 1) -> None:
        self.path = path
        self._fd = open_private_file(path, os.O_RDWR)
        self._next_seq = next_seq
        self.observers: list[CommitObserver] = []
        try:
            self._allocated = os.fstat(self._fd).st_size  # bytes on disk: commits, then zeros up to here
            self._end = content_end(self._fd, self._allocated)  # where the next commit goes
            # A torn last line from a crash: the next commit ends it first, so it stays one skipped line and the
            # commit reads whole. A failed write in this process may leave one too (a full disk writes part of a
            # line).
            self._torn = self._end > 0 and os.pread(self._fd, 1, self._end - 1) != b"\n"
        except BaseException:
            os.close(self._fd)
            raise

    @property
    def next_seq(self) -> int:
        """The sequence number the next commit gets."""
        return self._next_seq

    @property
    def end(self) -> int:
        """The offset where the next commit goes: the bytes before it are commits (and skipped lines); after it, up
        to the file's size, zeros written ahead."""
        return self._end

    def commit(self, records: Sequence[JournalRecord], *, sync: bool = True) -> Commit:
        """Append `records` as one commit and make it durable; raise JournalError and commit nothing on failure.

        With `sync=False` the commit is written (a crash of this process keeps it: the page cache holds it) and made
        durable against a crash of the machine by the next commit's fdatasync, which flushes every byte before it."""
        if self._fd < 0:
            raise JournalError(self.path, "journal is closed")
        done = Commit(seq=self._next_seq, records=list(records))
        try:
            check_strict(records)
            data = _ENCODER.encode(done) + b"\n"
        except (TypeError, ValueError, msgspec.EncodeError) as error:
            raise JournalError(self.path, f"cannot encode: {error}") from error
        self._before_write(records)
        try:
            self._write_all(b"\n" + data if self._torn else data, sync=sync)
        except OSError as error:
            self._torn = True  # part of the line may be on disk: never let the next commit join it
            raise JournalError(self.path, str(error)) from error
        self._torn = False
        self._next_seq += 1
        for observer in list(self.observers):
            observer(done)
        return done

    def _before_write(self, records: Sequence[JournalRecord]) -> None:
        """A hook for fault-injection in tests (a journal whose disk refuses some records); does nothing here."""

    def _write_all(self, data: bytes, *, sync: bool = True) -> None:
        """Write `data` at the end of the commits, then fdatasync (unless `sync` is off). A short write means the
        disk is full (the next write raises ENOSPC or EFBIG); whatever part reached the file stays before the next
        commit."""
        if self._end + len(data) > self._allocated:
            self._preallocate(self._end + len(data))
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += _pwrite(self._fd, view[written:], self._end + written)
        finally:
            self._end += written
            self._allocated = max(self._allocated, self._end)
        if sync:
            os.fdatasync(self._fd)

    def _preallocate(self, needed: int) -> None:
        """Zeros on disk up to past `needed`: the file grows by its size (at least PREALLOCATE_MIN, at most
        PREALLOCATE_MAX) in one write, made durable by the commit's fdatasync. Written zeros, not `fallocate`: a
        write into an allocated but unwritten extent would change the block map, which fdatasync must flush. If the
        disk refuses them, the commit is written past the zeros, as an append (and fails on its own if it must)."""
        step = min(max(self._allocated, PREALLOCATE_MIN), PREALLOCATE_MAX)
        target = -(-needed // step) * step
        zeros = memoryview(bytes(target - self._allocated))
        with contextlib.suppress(OSError):
            while zeros:
                wrote = _pwrite(self._fd, zeros, self._allocated)
                zeros = zeros[wrote:]
                self._allocated += wrote

    def close(self) -> None:
        """Cut the zeros written ahead off (a cleanly closed journal ends with its last commit), close the
        descriptor (idempotent)."""
        if self._fd >= 0:
            if self._allocated > self._end:
                with contextlib.suppress(OSError):  # the zeros stay: a reader skips them
                    os.ftruncate(self._fd, self._end)
            os.close(self._fd)
            self._fd = -1


def _pwrite(fd: int, data: memoryview, offset: int) -> int:
    """One pwrite; a write that takes nothing is a full disk."""
    wrote = os.pwrite(fd, data, offset)
    if wrote <= 0:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return wrote


def records_of(commits: Iterable[Commit]) -> list[JournalRecord]:
    """Every record of `commits`, in order."""
    return [record for commit in commits for record in commit.records]
