"""The stub's frame writer: every frame one locked write on the private protocol fd; output merged by time and size.

S3 "The protocol": frames never interleave (one lock, one write loop per batch); stream output is buffered per
(stream, cell) run and flushed when it passes FLUSH_CHARS, after FLUSH_DELAY_S from its first pending byte, or
before any other frame, so a cell's output always precedes the frames written after it (its `done` above all).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from eukhe_kernel.protocol import STREAM_FRAME_CHARS, encode_frame

FLUSH_CHARS = 64 * 1024
"""Pending output characters that trigger a flush at once (size merging)."""

FLUSH_DELAY_S = 0.004
"""How long the first pending character waits for company before the flusher sends it (time merging)."""


class FrameWriter:
    """Writes frames to `fd`; `stream()` merges output, `frame()` writes one frame after the pending output."""

    def __init__(self, fd: int, on_broken: Callable[[], None]) -> None:
        self.fd = fd
        self.lock = threading.RLock()
        self._pending: list[tuple[str, str | None, list[str]]] = []
        self._pending_chars = 0
        self._wake = threading.Event()
        self._on_broken = on_broken
        self.after_protected: Callable[[], None] | None = None
        """Called after a write if an interrupt arrived inside it (the signal handler defers it, see runtime)."""
        self.interrupt_deferred = False
        self._flusher = threading.Thread(target=self._flush_loop, name="eukhe-kernel-flusher", daemon=True)
        self._flusher.start()

    def stream(self, stream: str, cell_id: str | None, text: str) -> None:
        """Add output of `stream` ("stdout"/"stderr") tagged with `cell_id` (None: untagged raw output)."""
        if not text:
            return
        with self.lock:
            pending = self._pending
            if pending and pending[-1][0] == stream and pending[-1][1] == cell_id:
                pending[-1][2].append(text)
            else:
                pending.append((stream, cell_id, [text]))
            self._pending_chars += len(text)
            if self._pending_chars >= FLUSH_CHARS:
                self._flush_locked()
            elif not self._wake.is_set():
                self._wake.set()
        if self.interrupt_deferred and self.after_protected is not None:
            self.after_protected()

    def frame(self, data: bytes) -> None:
        """Write one encoded frame, after every pending output byte."""
        with self.lock:
            self._flush_locked()
            self._write_all(data)
        if self.interrupt_deferred and self.after_protected is not None:
            self.after_protected()

    def flush(self) -> None:
        """Send the pending output now."""
        with self.lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        pending, self._pending, self._pending_chars = self._pending, [], 0
        out: list[bytes] = []
        for stream, cell_id, parts in pending:
            text = "".join(parts)
            for start in range(0, len(text), STREAM_FRAME_CHARS):
                out.append(encode_frame(stream, cell_id, {"text": text[start : start + STREAM_FRAME_CHARS]}))
        self._write_all(b"".join(out))

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError:
            self._on_broken()  # the host is gone: nothing left to say

    def _flush_loop(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(FLUSH_DELAY_S)
            self._wake.clear()
            with self.lock:
                self._flush_locked()


PROTECTED_CODES = frozenset(
    {
        FrameWriter.stream.__code__,
        FrameWriter.frame.__code__,
        FrameWriter.flush.__code__,
        FrameWriter._flush_locked.__code__,
        FrameWriter._write_all.__code__,
    }
)
"""A KeyboardInterrupt raised inside these would cut a frame in half: the SIGINT handler defers it."""
