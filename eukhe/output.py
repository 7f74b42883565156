"""Bounded output's shell: `BoundedOutput`, one streaming output under a `Truncation` (S2 "Limits" 2 and 4), and
the facts of a text that the core decides on.

The shell half of the bounder: it moves bytes, counts newlines and reads cuts; `eukhe.core.bound` decides what to
store, what to trim, the window and the notice. Past the limits, the full output goes to an artifact file (0600,
created in one step, flock'ed shared while it is written) that the notice names. Under `Off` every byte is kept and
there is no artifact. Invariant: bytes_kept + bytes_dropped == bytes_written. Memory stays O(limit) under `On`,
however long the stream.

With `spill` (a job's output) every byte goes to that file from the first one, under `Off` too, so a crash of this
process loses none of what it read: the file becomes the artifact once the output passes the limits, and a close
within them removes it.

The artifact has a cap (`artifact_max_bytes`; `eukhe.core.artifact` decides): past it the file keeps the output's
head and its tail with a marker line between them that counts what was left out, and never grows past the cap.
The window and its counts are the same whatever the cap.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stringzilla

from eukhe.core import artifact as capping
from eukhe.core import bound
from eukhe.core.bound import Keep, Off, On, OutputLimits, TextCounts, TextFacts, Truncation
from eukhe.errors import EukheError
from eukhe.fsio import write_all
from eukhe.private_fs import create_private_file, make_private_dirs, write_private_file
from eukhe.records.output import OutputWindow
from eukhe.records.settings import DEFAULT_ARTIFACT_MAX_BYTES

# ---- reading the facts the core decides on: line lengths, newline counts and UTF-8 character boundaries.
#
# A position in a line is a character boundary unless it falls inside a valid multi-byte UTF-8 sequence that starts
# before it. Invalid bytes count as characters of one byte each, so invalid UTF-8 is data, never an error. The rule is
# local (it looks at most 3 bytes back), which is why a store that keeps 3 bytes beyond the cap reads the same cuts as
# the whole output.

NEWLINE = 0x0A


def job_artifact_prefix(job_id: str) -> str:
    """The name a job's output artifact starts with: where its call's checkpoint and a reopen after a crash find it."""
    return f"job-{job_id}"


def count_newlines(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """The newlines in `data[start:end]`, for 0 <= start <= end <= len(data): what `bytes.count` says, counted in
    place (no slice is copied) with StringZilla's SIMD count, several times `bytes.count`'s one-byte loop: the count
    is most of a busy stream's CPU time (bench/bounded_output.py, bench/many_jobs.py), and the library costs under
    1 MB of memory."""
    newlines: int = stringzilla.count(data, b"\n", start, len(data) if end is None else end)
    return newlines


def _sequence_length(line: bytes | bytearray, start: int) -> int:
    """Length of the valid UTF-8 multi-byte sequence starting at `start`, or 1 if there is none."""
    lead = line[start]
    if lead < 0xC2 or lead > 0xF4:
        return 1
    if lead < 0xE0:
        length, low, high = 2, 0x80, 0xBF
    elif lead < 0xF0:
        length = 3
        low, high = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F)}.get(lead, (0x80, 0xBF))
    else:
        length = 4
        low, high = {0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}.get(lead, (0x80, 0xBF))
    if start + length > len(line) or not low <= line[start + 1] <= high:
        return 1
    if any(not 0x80 <= line[i] <= 0xBF for i in range(start + 2, start + length)):
        return 1
    return length


def is_boundary(line: bytes | bytearray, position: int) -> bool:
    """Whether `position` (0..len) is a character boundary of `line`."""
    if position <= 0 or position >= len(line):
        return True
    return all(_sequence_length(line, start) <= position - start for start in range(max(0, position - 3), position))


def head_cut(line: bytes | bytearray, max_bytes: int) -> int:
    """The largest character boundary <= max_bytes in `line` (how much of the first line a head cut keeps)."""
    position = min(max_bytes, len(line))
    while not is_boundary(line, position):
        position -= 1
    return position


def tail_cut(line: bytes | bytearray, max_bytes: int) -> int:
    """The longest suffix of `line` of at most max_bytes bytes that starts at a character boundary."""
    position = max(0, len(line) - max_bytes)
    while not is_boundary(line, position):
        position += 1
    return len(line) - position


def line_lengths(text: bytes | bytearray) -> tuple[int, ...]:
    """Each line's length: the bytes up to and including a newline; a final unterminated piece is a line."""
    lengths: list[int] = []
    start = 0
    find = text.find
    while True:
        end = find(b"\n", start)
        if end < 0:
            break
        lengths.append(end + 1 - start)
        start = end + 1
    if start < len(text):
        lengths.append(len(text) - start)
    return tuple(lengths)


def read_facts(text: bytes | bytearray, limits: OutputLimits, starts_inside_line: bool = False) -> TextFacts:
    """The facts of a text for the core's window under `limits`."""
    lengths = line_lengths(text)
    cut = 0
    if lengths:
        if limits.keep is Keep.HEAD:
            cut = head_cut(text[: lengths[0]], limits.max_bytes)
        else:
            cut = tail_cut(text[len(text) - lengths[-1] :], limits.max_bytes)
    return TextFacts(lengths, starts_inside_line, cut)


def count_text(text: bytes | bytearray) -> TextCounts:
    """The counts of one streamed text: its length, newlines, and whether it ends with a newline."""
    length = len(text)
    # `count` neither copies nor allocates (the removal it replaced made a copy of every piece: new pages to map and
    # fault in for each read of a busy stream); this is the hot path of every bounded stream.
    newlines = count_newlines(text)
    return TextCounts(length, newlines, length > 0 and text[-1] == NEWLINE)


# ---- the bounder: one streaming output --------------------------------------------------------------------------

STREAM_PIECE = 1 << 20
"""Texts longer than this are fed to the core in pieces, so a single huge write stays O(limit) in memory."""


class BoundError(EukheError):
    """The core refused a request the shell wrote: a bug in the shell, reported with the core's reason."""

    code = "bound_refused"

    def __init__(self, refusal: bound.BoundRefusal) -> None:
        super().__init__(f"the output bounder refused a request: {refusal.reason.value}")
        self.refusal = refusal


@dataclass(frozen=True, slots=True)
class BoundedResult:
    """The window of an output and its counts, with the notice and the artifact holding the full output."""

    text: bytes
    bytes_kept: int
    bytes_dropped: int
    lines_kept: int
    lines_dropped: int
    notice: str | None
    artifact: Path | None
    artifact_error: str | None = None
    artifact_bytes_dropped: int = 0  # left out of the artifact by its cap (0: it holds the whole output)

    @property
    def truncated(self) -> bool:
        """Whether anything was dropped."""
        return self.bytes_dropped > 0 or self.lines_dropped > 0

    def to_record(self, with_text: bool = True) -> OutputWindow:
        """The window as every answer carries it: text as UTF-8 (the exact bytes in base64 when they are not);
        without its text (empty) when the reader gets the bytes another way (a read by reference)."""
        text, exact = "", None
        if with_text:
            try:
                text = self.text.decode("utf-8")
            except UnicodeDecodeError:
                text = self.text.decode("utf-8", errors="replace")
                exact = base64.b64encode(self.text).decode("ascii")
        return OutputWindow(
            text=text,
            bytes_kept=self.bytes_kept,
            bytes_dropped=self.bytes_dropped,
            lines_kept=self.lines_kept,
            lines_dropped=self.lines_dropped,
            notice=self.notice,
            artifact=None if self.artifact is None else str(self.artifact),
            artifact_error=self.artifact_error,
            text_base64=exact,
            artifact_bytes_dropped=self.artifact_bytes_dropped,
        )


def window_bytes(window: OutputWindow) -> bytes:
    """A window's exact kept bytes: its base64 when they are not UTF-8, else its text."""
    if window.text_base64 is not None:
        return base64.b64decode(window.text_base64)
    return window.text.encode("utf-8", "surrogatepass")


def save_artifact(directory: Path, prefix: str, data: bytes) -> tuple[Path | None, str | None]:
    """Keep `data` as a new private artifact in `directory`: its path, or why it could not be (path None)."""
    path = directory / f"{prefix}-{os.urandom(8).hex()}.log"
    try:
        write_private_file(path, data)
    except OSError as error:
        return None, f"cannot create the artifact in {directory}: {error.strerror or error}"
    return path, None


def narrow(
    window: OutputWindow, limits: OutputLimits, save: Callable[[bytes], tuple[Path | None, str | None]] | None = None
) -> OutputWindow:
    """The window a reader that takes at most `limits` gets of an output already bounded to `window`: the same
    output, less of it kept (from `limits.keep`'s end), the counts and the notice over the whole output. A window
    that fits is returned as it is. A window that held the whole output and no artifact (nothing was dropped before)
    is first kept whole by `save`, so that what this cut drops is not lost."""
    raw = window_bytes(window)
    facts = read_facts(raw, limits)
    before = bound.Slice(window.bytes_kept, window.bytes_dropped, window.lines_kept, window.lines_dropped)
    kept, counts = bound.narrowed(limits, facts, before)
    if kept.size == len(raw):
        return window
    artifact = None if window.artifact is None else Path(window.artifact)
    error = window.artifact_error
    if artifact is None and error is None and not before.truncated and save is not None:
        artifact, error = save(raw)
    shown = None if artifact is None else str(artifact)
    result = BoundedResult(
        raw[kept.start : kept.end],
        counts.bytes_kept,
        counts.bytes_dropped,
        counts.lines_kept,
        counts.lines_dropped,
        bound.notice(limits.keep, counts, shown, window.artifact_bytes_dropped),
        artifact,
        error,
        window.artifact_bytes_dropped,
    )
    return result.to_record()


def _ask(request: bound.Request) -> Any:
    reply = bound.answer(request)
    if isinstance(reply, bound.BoundRefusal):
        raise BoundError(reply)
    return reply


# ---- the artifact's cap ------------------------------------------------------------------------------------------

_artifact_max_bytes = DEFAULT_ARTIFACT_MAX_BYTES
"""The cap a BoundedOutput takes when it is given none: the user's `artifact_max_bytes`, set by whoever reads the
settings in this process (a session as it opens, `eukhe run`)."""

COPY_PIECE = 1 << 20
"""Bytes moved at once within an artifact's file (a compaction or its close)."""
_NO_COPY_FILE_RANGE = {errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM}
"""What copy_file_range answers where it cannot copy in this file system: the bytes go through pread/pwrite."""


def set_artifact_max_bytes(cap: int) -> None:
    """The cap of every artifact this process makes from now on without a cap of its own (0: none)."""
    global _artifact_max_bytes  # one user setting for the whole process, set where the settings are read
    capping.shape_of(cap)  # ArtifactFactError for a cap below MIN_CAP
    _artifact_max_bytes = cap


def artifact_max_bytes() -> int:
    """The cap a BoundedOutput given none takes now."""
    return _artifact_max_bytes


def _count_newlines_in_file(fd: int, start: int, length: int) -> int:
    newlines = 0
    for offset in range(start, start + length, COPY_PIECE):
        newlines += count_newlines(os.pread(fd, min(COPY_PIECE, start + length - offset), offset))
    return newlines


def _move_forward(reader: int, writer: int, move: capping.Move) -> None:
    """Copy within a file, piece by piece from the front: safe when the target is not after the source."""
    for done in range(0, move.length, COPY_PIECE):
        piece = os.pread(reader, min(COPY_PIECE, move.length - done), move.source + done)
        view = memoryview(piece)
        written = 0
        while written < len(view):
            written += os.pwrite(writer, view[written:], move.target + done + written)


def _move_apart(reader: int, writer: int, move: capping.Move) -> None:
    """Copy between ranges of a file that do not overlap: in the kernel where the file system can (no bytes pass
    through this process), else piece by piece."""
    done = 0
    try:
        while done < move.length:
            copied = os.copy_file_range(reader, writer, move.length - done, move.source + done, move.target + done)
            if copied == 0:
                raise OSError(errno.EIO, f"the artifact ends before byte {move.source + done}")
            done += copied
    except OSError as error:
        if error.errno not in _NO_COPY_FILE_RANGE:
            raise
        _move_forward(reader, writer, capping.Move(move.source + done, move.target + done, move.length - done))


class BoundedOutput:
    """One output stream bounded by a `Truncation`; write any chunks, read snapshots, close once."""

    def __init__(
        self,
        truncation: Truncation,
        artifact_dir: Path | None = None,
        artifact_prefix: str = "output",
        *,
        spill: bool = False,
        artifact_max_bytes: int | None = None,
    ):
        """`spill`: write every byte to the file in `artifact_dir` from the first one (nothing without a dir).
        `artifact_max_bytes`: the artifact's cap (None: the process's, `set_artifact_max_bytes`; 0: none)."""
        if not isinstance(truncation, On | Off):
            raise TypeError(f"truncation must be On(...) or Off(), got {truncation!r}")
        self.truncation = truncation
        self.bytes_written = 0
        self._artifact_dir = artifact_dir
        self._artifact_prefix = artifact_prefix
        self._artifact_path: Path | None = None
        self._artifact_fd: int | None = None
        self._artifact_error: str | None = None
        cap = _artifact_max_bytes if artifact_max_bytes is None else artifact_max_bytes
        # The artifact's file: what the core knows of it, and what was appended since it last asked (the hot path
        # only counts down the room).
        self._file = capping.Spill(capping.shape_of(cap))
        self._room = self._file.room
        self._appended = 0
        self._spill = spill and artifact_dir is not None
        self._store = bytearray()
        # All bytes so far, until they go to the artifact (a spill has them in its file already).
        self._pending: bytearray | None = None if self._spill else bytearray()
        self._store_starts_inside_line = False
        self._final: BoundedResult | None = None
        self._stepper: bound.Stepper | None = None
        if isinstance(truncation, On):
            self._stepper = _ask(bound.OpenRequest(truncation.limits))

    @property
    def limits(self) -> OutputLimits | None:
        """The limits in force, or None under `Off`."""
        return self.truncation.limits if isinstance(self.truncation, On) else None

    def write(self, data: bytes | bytearray) -> None:
        """Add bytes to the output, in any chunking."""
        if self._final is not None:
            raise ValueError("write to a closed BoundedOutput")
        if not data:
            return
        self.bytes_written += len(data)
        if self._spill:
            if self._artifact_path is None and self._artifact_error is None:
                self._open_artifact()
            self._to_artifact(data)
        if self._stepper is None:
            self._store += data
            return
        for start in range(0, len(data), STREAM_PIECE):
            piece = data[start : start + STREAM_PIECE] if len(data) > STREAM_PIECE else data
            self._feed(piece)
            if not self._spill:
                self._keep_for_artifact(piece)

    def _feed(self, piece: bytes | bytearray) -> None:
        stepper = self._stepper
        assert stepper is not None
        limits = stepper.limits
        if stepper.full:
            self._stepper = _ask(bound.SkipRequest(stepper, count_text(piece))).stepper
            return
        front = len(piece) - bound.margin(limits)
        start = 0  # where the part the store takes begins
        if limits.keep is Keep.TAIL and front > 0 and stepper.stored + len(piece) > 2 * bound.margin(limits):
            # Nothing before the last margin of this piece can be in a later window: count it, don't store it.
            # Every byte is counted once, in place (no slice is made to count), and only the rest is copied, once,
            # into the store.
            front_counts = bound.TextCounts(front, count_newlines(piece, 0, front), piece[front - 1] == 0x0A)
            skipped = _ask(bound.SkipRequest(stepper, front_counts))
            if skipped.clears:
                self._store.clear()
                self._store_starts_inside_line = piece[front - 1] != 0x0A
            stepper = skipped.stepper
            start = front
        size = len(piece) - start
        counts = bound.TextCounts(size, count_newlines(piece, start), size > 0 and piece[-1] == 0x0A)
        answer: bound.OutAnswer = _ask(bound.OutRequest(stepper, counts))
        self._store += memoryview(piece)[start : start + answer.take]
        if answer.trim:
            self._store_starts_inside_line = self._store[answer.trim - 1] != 0x0A
            del self._store[: answer.trim]
        self._stepper = answer.stepper

    def _keep_for_artifact(self, data: bytes | bytearray) -> None:
        if self._pending is not None:
            self._pending += data
            assert self._stepper is not None
            if self._stepper.exceeded:
                pending, self._pending = self._pending, None
                self._open_artifact()
                self._to_artifact(pending)
        else:
            self._to_artifact(data)

    def _open_artifact(self) -> None:
        if self._artifact_dir is None:
            return
        try:
            path = self._artifact_dir / f"{self._artifact_prefix}-{os.urandom(8).hex()}.log"
            try:  # its dir is made only when missing: no stat per file (every job that writes opens one)
                self._artifact_fd = create_private_file(path)
            except FileNotFoundError:
                make_private_dirs(self._artifact_dir)
                self._artifact_fd = create_private_file(path)
            # Held (shared) while it is written: an artifact collection never removes an artifact being written.
            fcntl.flock(self._artifact_fd, fcntl.LOCK_SH)
            self._artifact_path = path
        except OSError as error:
            self._artifact_error = f"cannot create the artifact in {self._artifact_dir}: {error.strerror or error}"

    def _to_artifact(self, data: bytes | bytearray) -> None:
        # Unbuffered: every byte read is in the kernel's hands at once, so a crash of this process loses none.
        fd = self._artifact_fd
        if fd is None:
            return
        try:
            room = self._room
            if room is None or len(data) <= room:
                write_all(fd, data)
                if room is not None:
                    self._room = room - len(data)
                    self._appended += len(data)
                return
            view = memoryview(data)
            while room is not None and len(view) > room:
                write_all(fd, view[:room])
                view = view[room:]
                self._appended += room
                self._compact(fd)
                room = self._room
            write_all(fd, view)
            self._appended += len(view)
            self._room = None if room is None else room - len(view)
        except OSError as error:
            self._artifact_error = f"cannot write the artifact {self._artifact_path}: {error.strerror or error}"
            self._close_artifact()

    def _synced(self) -> capping.Spill:
        """What the core knows of the file, with the bytes appended since it last asked."""
        if self._appended:
            self._file = capping.appended(self._file, self._appended)
            self._appended = 0
        return self._file

    def _reader(self) -> int:
        assert self._artifact_path is not None
        return os.open(self._artifact_path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)

    def _compact(self, fd: int) -> None:
        """The file is at its cap: its latest bytes move down (`capping.compact`) to make room."""
        plan = capping.compact(self._synced())
        shape = plan.spill.shape
        assert shape is not None
        reader = self._reader()
        try:
            _move_apart(reader, fd, plan.move)
            if plan.first:
                head_ends_line = os.pread(reader, 1, shape.head - 1) == b"\n"
                os.pwrite(fd, capping.provisional_marker(head_ends_line), shape.head)
        finally:
            os.close(reader)
        os.ftruncate(fd, plan.cut)
        os.lseek(fd, plan.cut, os.SEEK_SET)
        self._file = plan.spill
        self._room = plan.spill.room

    def _finish_artifact(self, total_newlines: int) -> None:
        """Close a file past its cap (`capping.finish`): the exact marker, the tail after it, nothing beyond."""
        fd = self._artifact_fd
        spill = self._synced()
        shape = spill.shape
        if fd is None or shape is None or not spill.passed:
            return
        try:
            reader = self._reader()
            try:
                kept_newlines = _count_newlines_in_file(reader, 0, shape.head)
                kept_newlines += _count_newlines_in_file(reader, spill.size - shape.tail, shape.tail)
                head_ends_line = os.pread(reader, 1, shape.head - 1) == b"\n"
                plan = capping.finish(spill, total_newlines - kept_newlines, head_ends_line)
                assert plan is not None
                os.pwrite(fd, plan.marker, shape.head)  # below the source of the move: nothing it reads
                _move_forward(reader, fd, plan.move)
            finally:
                os.close(reader)
            os.ftruncate(fd, plan.cut)
        except OSError as error:
            self._artifact_error = f"cannot write the artifact {self._artifact_path}: {error.strerror or error}"
            self._close_artifact()

    def _close_artifact(self) -> None:
        if self._artifact_fd is not None:
            os.close(self._artifact_fd)
            self._artifact_fd = None

    def snapshot(self) -> BoundedResult:
        """The window so far, without closing."""
        if self._final is not None:
            return self._final
        return self._read(close=False)

    def close(self) -> BoundedResult:
        """The final window; the artifact (if any) is complete and closed, a spill within the limits removed.
        Idempotent."""
        if self._final is None:
            if self._stepper is not None and self._artifact_fd is not None:
                self._finish_artifact(self._stepper.total_newlines)
            final = self._read(close=True)
            if self._spill and final.artifact is None and self._artifact_path is not None:
                with contextlib.suppress(OSError):  # gone already: nothing to remove
                    os.unlink(self._artifact_path)
            self._close_artifact()
            self._final = final
            self._pending = None
        return self._final

    def _read(self, close: bool) -> BoundedResult:
        if self._stepper is None:
            text = bytes(self._store)
            lines = count_newlines(text) + (1 if text and text[-1] != NEWLINE else 0)  # a last unended piece too
            return BoundedResult(text, len(text), 0, lines, 0, None, None, self._artifact_error)
        limits = self._stepper.limits
        facts = read_facts(self._store, limits, self._store_starts_inside_line)
        if close:
            shut: bound.ShutReply = _ask(bound.ShutRequest(self._stepper, facts))
            self._stepper, reading = shut.stepper, shut.reading
        else:
            reading = _ask(bound.LookRequest(self._stepper, facts))
        counts = reading.counts
        # A spill is the artifact only once the output passes the limits (until then its window drops nothing).
        path = self._artifact_path if counts.truncated or not self._spill else None
        # An artifact a write failed on is not the full output: the notice then says it was not saved.
        complete = path is not None and self._artifact_error is None
        artifact = str(path) if complete else None
        text = bytes(self._store[reading.window.start : reading.window.end])
        dropped = 0
        if complete:
            file = self._synced()
            dropped = capping.kept(file.shape, file.written).dropped if close else file.dropped
        notice = _ask(bound.NoticeRequest(limits.keep, counts, artifact, dropped))
        return BoundedResult(
            text,
            counts.bytes_kept,
            counts.bytes_dropped,
            counts.lines_kept,
            counts.lines_dropped,
            notice,
            path,
            self._artifact_error,
            dropped,
        )

    def __enter__(self) -> BoundedOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
