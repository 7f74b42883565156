"""STAND-IN for the lead's `eukhe.output` (issue 2), with the documented API only; main's module replaces it on merge.

Bytes-only window (no line limits), tail or head; full output spills to an artifact past the cap.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from eukhe.core.limits import Keep, On, Truncation
from eukhe.private_fs import create_private_file, make_private_dirs


@dataclass(frozen=True, slots=True)
class BoundedResult:
    """The window of an output and its counts."""

    text: bytes
    bytes_kept: int
    bytes_dropped: int
    lines_kept: int
    lines_dropped: int
    notice: str | None
    artifact: Path | None

    def as_json(self) -> dict[str, Any]:
        return {
            "text": self.text.decode("utf-8", "replace"),
            "bytes_kept": self.bytes_kept,
            "bytes_dropped": self.bytes_dropped,
            "lines_kept": self.lines_kept,
            "lines_dropped": self.lines_dropped,
            "notice": self.notice,
            "artifact": None if self.artifact is None else str(self.artifact),
        }


class BoundedOutput:
    """Stand-in: keeps a byte window under the cap, counts the rest."""

    def __init__(self, truncation: Truncation, artifact_dir: Path | None = None, artifact_prefix: str = "output"):
        self._cap = truncation.limits.max_bytes if isinstance(truncation, On) else None
        self._head = isinstance(truncation, On) and truncation.limits.keep is Keep.HEAD
        self._dir = artifact_dir
        self._prefix = artifact_prefix
        self._window = bytearray()
        self._all: bytearray | None = bytearray()
        self._file: BinaryIO | None = None
        self._path: Path | None = None
        self.bytes_written = 0
        self._final: BoundedResult | None = None

    def write(self, data: bytes) -> None:
        self.bytes_written += len(data)
        if self._cap is None:
            self._window += data
            return
        if self._head:
            self._window += data[: max(0, self._cap - len(self._window))]
        else:
            self._window += data
            if len(self._window) > 2 * self._cap + 65536:
                del self._window[: len(self._window) - self._cap]
        if self._all is not None:
            self._all += data
            if self.bytes_written > self._cap:
                if self._dir is not None:
                    make_private_dirs(self._dir)
                    self._path = self._dir / f"{self._prefix}-{uuid.uuid4().hex[:16]}.log"
                    self._file = os.fdopen(create_private_file(self._path), "wb")
                    self._file.write(self._all)
                self._all = None
        elif self._file is not None:
            self._file.write(data)

    def _read(self) -> BoundedResult:
        text = bytes(self._window)
        if self._cap is not None and not self._head:
            text = text[max(0, len(text) - self._cap) :]
        dropped = self.bytes_written - len(text)
        notice = None if dropped == 0 else f"[output truncated: {dropped} bytes dropped]"
        return BoundedResult(text, len(text), dropped, text.count(b"\n"), 0, notice, self._path)

    def snapshot(self) -> BoundedResult:
        if self._final is not None:
            return self._final
        if self._file is not None:
            self._file.flush()
        return self._read()

    def close(self) -> BoundedResult:
        if self._final is None:
            if self._file is not None:
                self._file.close()
                self._file = None
            self._final = self._read()
        return self._final
