"""The output bounder the kernel uses: eukhe.output (S2 "Limits" 4).

Until main has eukhe.output this holds a minimal private stand-in with the same API (dropped at the merge).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eukhe.core.limits import Keep, On, Truncation


@dataclass(frozen=True, slots=True)
class BoundedResult:
    """The window so far and its counts (stand-in)."""

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
            "artifact": str(self.artifact) if self.artifact else None,
        }


class BoundedOutput:
    """Stand-in: keeps the head or tail bytes within max_bytes (lines not bounded)."""

    def __init__(self, truncation: Truncation, artifact_dir: Path | None = None, artifact_prefix: str = "output"):
        self._limit = truncation.limits.max_bytes if isinstance(truncation, On) else None
        self._head = isinstance(truncation, On) and truncation.limits.keep is Keep.HEAD
        self._data = bytearray()
        self.bytes_written = 0
        self._closed: BoundedResult | None = None

    def write(self, data: bytes | bytearray) -> None:
        self.bytes_written += len(data)
        self._data += data
        if self._limit is not None and len(self._data) > 2 * self._limit + 65536:
            self._trim()

    def _trim(self) -> None:
        if self._limit is None:
            return
        if self._head:
            del self._data[self._limit :]
        else:
            del self._data[: len(self._data) - self._limit]

    def snapshot(self) -> BoundedResult:
        self._trim()
        kept = len(self._data)
        dropped = self.bytes_written - kept
        lines = self._data.count(b"\n")
        notice = f"[{dropped} bytes dropped]" if dropped else None
        return BoundedResult(bytes(self._data), kept, dropped, lines, 0, notice, None)

    def close(self) -> BoundedResult:
        if self._closed is None:
            self._closed = self.snapshot()
        return self._closed


__all__ = ["BoundedOutput", "BoundedResult"]
