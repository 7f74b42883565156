"""The frame splitter (S3 "The protocol" 3): kernel stdout bytes, read in chunks of any size, into lines.

A line within the limit is handed whole (`Line`); a line over it keeps only its first `head` bytes and the rest is
counted and dropped up to its newline, never buffered (`Oversized`). Memory is O(limit) whatever the kernel writes.
"""

from __future__ import annotations

from eukhe.core.gate import DEFAULT_LIMITS, GateLimits, GateState, Line, Oversized, Piece, ProtocolFault, Verdict, admit


class FrameSplitter:
    """Feed it bytes as they come; it answers the whole lines (or oversized heads) they complete."""

    def __init__(self, limits: GateLimits = DEFAULT_LIMITS) -> None:
        self._limit = limits.line
        self._head_limit = limits.head
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
                if len(self._head) < self._head_limit:
                    self._head += data[position : min(end, position + self._head_limit - len(self._head))]
                self._length += end - position
            elif len(self._buffer) + (end - position) > self._limit:
                self._skipping = True
                self._head = (bytes(self._buffer) + data[position : min(end, position + self._head_limit)])[
                    : self._head_limit
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


class FrameReader:
    """The host's reading of kernel stdout: the splitter, then the gate on every piece, in order (sans I/O).

    After a `ProtocolFault` the stream cannot be trusted: `feed` stops there and answers nothing more.
    """

    def __init__(self, served: frozenset[str], limits: GateLimits = DEFAULT_LIMITS) -> None:
        self.served = served
        self.limits = limits
        self.splitter = FrameSplitter(limits)
        self.state = GateState()
        self.faulted = False

    def feed(self, data: bytes) -> list[Verdict]:
        """The verdicts on the frames `data` completes, in order; a fault is the last verdict ever."""
        verdicts: list[Verdict] = []
        if self.faulted:
            return verdicts
        for piece in self.splitter.feed(data):
            self.state, verdict = admit(self.state, piece, self.served, self.limits)
            verdicts.append(verdict)
            if isinstance(verdict, ProtocolFault):
                self.faulted = True
                break
        return verdicts
