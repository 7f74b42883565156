"""`BoundedOutput`: one streaming output under a `Truncation` (S2 "Limits" 2 and 4).

The shell half of the bounder: it moves bytes, counts newlines and reads cuts; `eukhe.core.bound` decides what to
store, what to trim, the window and the notice. Past the limits, the full output goes to an artifact file (0600,
created in one step, flock'ed shared while it is written) that the notice names. Under `Off` every byte is kept and
there is no artifact. Invariant: bytes_kept + bytes_dropped == bytes_written. Memory stays O(limit) under `On`,
however long the stream.
"""

from __future__ import annotations

import base64
import fcntl
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eukhe.core import bound
from eukhe.core.limits import Keep, Off, On, OutputLimits, Truncation
from eukhe.errors import EukheError
from eukhe.fsio import write_all
from eukhe.private_fs import create_private_file, make_private_dirs
from eukhe.records.output import OutputWindow
from eukhe.text_facts import NEWLINE, count_newlines, count_text, read_facts

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
        )


def _ask(request: bound.Request) -> Any:
    reply = bound.answer(request)
    if isinstance(reply, bound.BoundRefusal):
        raise BoundError(reply)
    return reply


class BoundedOutput:
    """One output stream bounded by a `Truncation`; write any chunks, read snapshots, close once."""

    def __init__(self, truncation: Truncation, artifact_dir: Path | None = None, artifact_prefix: str = "output"):
        if not isinstance(truncation, On | Off):
            raise TypeError(f"truncation must be On(...) or Off(), got {truncation!r}")
        self.truncation = truncation
        self.bytes_written = 0
        self._artifact_dir = artifact_dir
        self._artifact_prefix = artifact_prefix
        self._artifact_path: Path | None = None
        self._artifact_fd: int | None = None
        self._artifact_error: str | None = None
        self._store = bytearray()
        self._pending: bytearray | None = bytearray()  # all bytes so far, until they spill to the artifact
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
        if self._stepper is None:
            self._store += data
            return
        for start in range(0, len(data), STREAM_PIECE):
            piece = data[start : start + STREAM_PIECE] if len(data) > STREAM_PIECE else data
            self._feed(piece)
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
            make_private_dirs(self._artifact_dir)
            path = self._artifact_dir / f"{self._artifact_prefix}-{uuid.uuid4().hex[:16]}.log"
            self._artifact_fd = create_private_file(path)
            # Held (shared) while it is written: an artifact collection never removes an artifact being written.
            fcntl.flock(self._artifact_fd, fcntl.LOCK_SH)
            self._artifact_path = path
        except OSError as error:
            self._artifact_error = f"cannot create the artifact in {self._artifact_dir}: {error.strerror or error}"

    def _to_artifact(self, data: bytes | bytearray) -> None:
        # Unbuffered: every byte read is in the kernel's hands at once, so a crash of this process loses none.
        if self._artifact_fd is None:
            return
        try:
            write_all(self._artifact_fd, data)
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
        """The final window; the artifact (if any) is complete and closed. Idempotent."""
        if self._final is None:
            self._close_artifact()
            self._final = self._read(close=True)
            self._pending = None
        return self._final

    def _read(self, close: bool) -> BoundedResult:
        if self._stepper is None:
            text = bytes(self._store)
            lines = count_newlines(text) + (1 if text and text[-1] != NEWLINE else 0)  # a last unended piece too
            return BoundedResult(text, len(text), 0, lines, 0, None, None)
        limits = self._stepper.limits
        facts = read_facts(self._store, limits, self._store_starts_inside_line)
        if close:
            shut: bound.ShutReply = _ask(bound.ShutRequest(self._stepper, facts))
            self._stepper, reading = shut.stepper, shut.reading
        else:
            reading = _ask(bound.LookRequest(self._stepper, facts))
        counts = reading.counts
        # An artifact a write failed on is not the full output: the notice then says it was not saved.
        complete = self._artifact_path is not None and self._artifact_error is None
        artifact = str(self._artifact_path) if complete else None
        text = bytes(self._store[reading.window.start : reading.window.end])
        notice = _ask(bound.NoticeRequest(limits.keep, counts, artifact))
        return BoundedResult(
            text,
            counts.bytes_kept,
            counts.bytes_dropped,
            counts.lines_kept,
            counts.lines_dropped,
            notice,
            self._artifact_path,
            self._artifact_error,
        )

    def __enter__(self) -> BoundedOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
