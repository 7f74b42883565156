"""Where the session gets `BoundedOutput` (S2 "Limits" 4).

TEMPORARY stand-in with the documented API of `eukhe.output` (issue 2, on main soon): when it lands, this module
becomes `from eukhe.output import BoundedOutput, BoundedResult`. It keeps a byte window of the tail or head by the
limits and spills the whole output to a 0600 artifact once the output passes them.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eukhe.core.limits import Keep, Off, On, Truncation
from eukhe.private_fs import create_private_file


@dataclass(frozen=True, slots=True)
class BoundedResult:
    """A bounded output: the kept window and what was dropped, with the notice and the artifact."""

    text: bytes
    bytes_kept: int
    bytes_dropped: int
    lines_kept: int
    lines_dropped: int
    notice: str | None
    artifact: Path | None

    def as_json(self) -> dict[str, Any]:
        """The JSON form."""
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
    """Stand-in: keeps everything in memory up to the limit, spills the full output to an artifact past it."""

    def __init__(self, truncation: Truncation, artifact_dir: Path | None, artifact_prefix: str = "output") -> None:
        self._truncation = truncation
        self._dir = artifact_dir
        self._prefix = artifact_prefix
        self._buffer = bytearray()
        self._artifact: Path | None = None
        self._fd = -1
        self._closed: BoundedResult | None = None
        self.bytes_written = 0

    def _limits(self) -> tuple[int, int, Keep] | None:
        if isinstance(self._truncation, Off):
            return None
        assert isinstance(self._truncation, On)
        limits = self._truncation.limits
        return limits.max_bytes, limits.max_lines, limits.keep

    def write(self, data: bytes) -> None:
        """Add output."""
        if self._closed is not None or not data:
            return
        self.bytes_written += len(data)
        if self._fd >= 0:
            os.write(self._fd, data)
        self._buffer += data
        limits = self._limits()
        if limits is None:
            return
        max_bytes, max_lines, _ = limits
        over = len(self._buffer) > max_bytes or self._buffer.count(b"\n") > max_lines
        if over and self._fd < 0 and self._dir is not None:
            self._artifact = self._dir / f"{self._prefix}-{secrets.token_hex(4)}.log"
            self._fd = create_private_file(self._artifact)
            os.write(self._fd, bytes(self._buffer))

    def _window(self) -> BoundedResult:
        data = bytes(self._buffer)
        total_lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        limits = self._limits()
        if limits is None:
            return BoundedResult(data, len(data), 0, total_lines, 0, None, None)
        max_bytes, max_lines, keep = limits
        lines = data.splitlines(keepends=True)
        kept = lines[-max_lines:] if keep is Keep.TAIL else lines[:max_lines]
        if max_lines == 0:
            kept = []
        window = b"".join(kept)
        window = window[-max_bytes:] if keep is Keep.TAIL else window[:max_bytes]
        if max_bytes == 0:
            window = b""
        dropped = len(data) - len(window)
        lines_kept = window.count(b"\n") + (1 if window and not window.endswith(b"\n") else 0)
        notice = None
        if dropped:
            notice = f"[output truncated: {dropped} bytes dropped"
            notice += f"; full output: {self._artifact}]" if self._artifact else "]"
        return BoundedResult(window, len(window), dropped, lines_kept, total_lines - lines_kept, notice, self._artifact)

    def snapshot(self) -> BoundedResult:
        """The window so far."""
        return self._closed if self._closed is not None else self._window()

    def close(self) -> BoundedResult:
        """Final result; idempotent."""
        if self._closed is None:
            self._closed = self._window()
            if self._fd >= 0:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1
        return self._closed
