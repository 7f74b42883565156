"""The one bounded NDJSON line splitter (daemon requests and kernel frames): bytes in, read in chunks of any size,
lines out (S3 "The protocol" 3; docs/daemon-protocol.md "Framing").

Sans I/O. A line within the limit is handed whole (`Line`, its newline removed); a line over it keeps only its first
`head` bytes and the rest is counted and dropped up to its newline, never buffered (`Oversized`, with its total
length), so memory is O(limit) whatever the peer writes. A line is handed when its newline arrives: an unfinished one
stays `pending`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Line:
    """A whole line within the limit, its newline removed."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line over the limit: only its first bytes were kept; `length` counts every byte (without the newline)."""

    head: bytes
    length: int


Piece = Line | Oversized


class LineSplitter:
    """Feed it bytes as they come; it answers the pieces (whole lines or oversized heads) they complete, in order."""

    def __init__(self, limit: int, head: int) -> None:
        if limit < 1 or head < 1:
            raise ValueError(f"line limit and head must be positive, got {limit} and {head}")
        self.limit = limit
        self.head_limit = head
        self._buffer = bytearray()
        self._skipping = False  # inside an oversized line: counting, not keeping
        self._head = b""
        self._length = 0

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line (kept or counted)."""
        return self._length if self._skipping else len(self._buffer)

    def feed(self, data: bytes) -> list[Piece]:
        """The pieces `data` completes, in order."""
        pieces: list[Piece] = []
        position = 0
        size = len(data)
        while position < size:
            newline = data.find(b"\n", position)
            end = size if newline < 0 else newline
            if self._skipping:
                if len(self._head) < self.head_limit:
                    self._head += data[position : min(end, position + self.head_limit - len(self._head))]
                self._length += end - position
            elif len(self._buffer) + (end - position) > self.limit:
                self._skipping = True
                self._head = (bytes(self._buffer) + data[position : min(end, position + self.head_limit)])[
                    : self.head_limit
                ]
                self._length = len(self._buffer) + (end - position)
                self._buffer.clear()
            elif newline >= 0:
                if self._buffer:
                    self._buffer += data[position:end]
                    pieces.append(Line(bytes(self._buffer)))
                    self._buffer.clear()
                else:
                    pieces.append(Line(data[position:end]))
            else:
                self._buffer += data[position:end]
            if newline < 0:
                break
            if self._skipping:
                pieces.append(Oversized(self._head, self._length))
                self._skipping = False
                self._head = b""
                self._length = 0
            position = newline + 1
        return pieces
