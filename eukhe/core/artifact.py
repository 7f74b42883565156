"""What an output's artifact keeps under `artifact_max_bytes` (docs/output.md, "The artifact's cap"), and how its
file is written so that it never passes the cap, not even while it is written.

The rule. An output of at most `cap` bytes is kept whole. A longer one keeps its first `head` bytes and its last
`tail` bytes, with one marker line between them that states exactly how many bytes (and newlines) were left out, of
how many; `head == tail == (cap - MARKER_ROOM) // 4`. Invariant: head + tail + dropped == every byte.

The file while it is written (the shell moves the bytes, this module says where). Until the output passes the cap
the file is the output. From then on it is `head`, a marker slot of MARKER_ROOM bytes, then the area: the latest
bytes of the output, contiguous, at least `tail` of them. The area fills the file up to the cap; then the last
`tail` bytes of the area move to its start (`Move`: a compaction, the same one every time, source and target never
overlapping) and writing goes on after them. So a reader of the file at any time (a crash, a reopen) finds the
output's start, then its latest bytes in order. The first compaction also writes the slot: a provisional marker,
padded, which says the count is not known yet. At the end (`finish`) the area's last `tail` bytes move to just after
the exact marker (the target is never after the source: a forward copy is safe) and the file is cut there.

Half the cap is room to write the latest bytes in: a compaction moves `tail` bytes once per `2 * tail` written past
the cap (a copy within the file, in the kernel where the file system can), so a flood past the cap costs half a copy
per byte more than a plain write. The closed artifact takes about half the cap; its file never more than the cap. A
cap of 0 is no cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fact_errors import FactError, is_count

MARKER_ROOM = 256
"""Bytes the marker slot takes while the file is written; the exact marker is never longer (a law checks it)."""
MIN_CAP = 4096
"""The smallest cap: room for the marker slot and a head and a tail worth keeping."""
NO_CAP = 0


class ArtifactFactError(FactError):
    """A fact about an artifact no real writer has (a negative size, bytes past the room, a cap below MIN_CAP)."""

    what = "a fact of an artifact"


@dataclass(frozen=True, slots=True)
class Shape:
    """How an artifact under `cap` is laid out once the output passes the cap."""

    cap: int

    def __post_init__(self) -> None:
        if not is_count(self.cap, MIN_CAP):
            raise ArtifactFactError("cap", self.cap)

    @property
    def head(self) -> int:
        """Bytes kept from the output's start."""
        return (self.cap - MARKER_ROOM) // 4

    @property
    def tail(self) -> int:
        """Bytes kept from the output's end."""
        return (self.cap - MARKER_ROOM) // 4

    @property
    def area_start(self) -> int:
        """Where the area (the latest bytes) begins in the file once the output passed the cap."""
        return self.head + MARKER_ROOM


def shape_of(cap: int) -> Shape | None:
    """The shape of a cap, None for no cap (0)."""
    if cap == NO_CAP:
        return None
    return Shape(cap)


@dataclass(frozen=True, slots=True)
class Kept:
    """What the closed artifact of an output holds: its first `head` bytes and its last `tail`, `dropped` between
    them (0: the whole output, which is then all in `head`)."""

    head: int
    tail: int
    dropped: int

    @property
    def partial(self) -> bool:
        """Whether bytes were left out (the artifact then has a marker line)."""
        return self.dropped > 0


def kept(shape: Shape | None, total: int) -> Kept:
    """What an artifact keeps of an output of `total` bytes."""
    if not is_count(total):
        raise ArtifactFactError("total", total)
    if shape is None or total <= shape.cap:
        return Kept(total, 0, 0)
    return Kept(shape.head, shape.tail, total - shape.head - shape.tail)


# ---- the file while it is written --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spill:
    """The artifact's file as written so far: `written` bytes of output, `size` bytes of file."""

    shape: Shape | None
    written: int = 0
    size: int = 0

    @property
    def room(self) -> int | None:
        """Bytes the file takes before the next compaction (None: no cap, no end)."""
        return None if self.shape is None else self.shape.cap - self.size

    @property
    def passed(self) -> bool:
        """Whether the output passed the cap: the file is no longer the output (its first compaction is done)."""
        return self.size != self.written

    @property
    def dropped(self) -> int:
        """Output bytes no longer in the file (0 until the output passes the cap)."""
        return self.written - (self.size - MARKER_ROOM) if self.passed else 0


@dataclass(frozen=True, slots=True)
class Move:
    """Copy `length` bytes of the file from offset `source` to offset `target`."""

    source: int
    target: int
    length: int


@dataclass(frozen=True, slots=True)
class Compaction:
    """Make room: do `move`, cut the file at `cut`; `first`: write the provisional marker at `shape.head` too (the
    output has just passed the cap)."""

    spill: Spill
    move: Move
    cut: int
    first: bool


def appended(spill: Spill, length: int) -> Spill:
    """`length` more bytes written at the file's end (at most the room)."""
    room = spill.room
    if not is_count(length) or (room is not None and length > room):
        raise ArtifactFactError("length", length)
    return Spill(spill.shape, spill.written + length, spill.size + length)


def compact(spill: Spill) -> Compaction:
    """The compaction of a full file: its last `tail` bytes move to the area's start."""
    shape = spill.shape
    if shape is None or spill.size != shape.cap:
        raise ArtifactFactError("size", spill.size)
    move = Move(shape.cap - shape.tail, shape.area_start, shape.tail)
    cut = shape.area_start + shape.tail
    return Compaction(Spill(shape, spill.written, cut), move, cut, first=spill.written == shape.cap)


@dataclass(frozen=True, slots=True)
class Finish:
    """Close a partial artifact: write `marker` at `shape.head`, do `move`, cut the file at `cut`."""

    kept: Kept
    marker: bytes
    move: Move
    cut: int


def finish(spill: Spill, newlines_dropped: int, head_ends_line: bool) -> Finish | None:
    """How the file of a finished output is closed: None when it kept the whole output (it is that output)."""
    shape = spill.shape
    if shape is None or not spill.passed:
        return None
    if not is_count(newlines_dropped):
        raise ArtifactFactError("newlines_dropped", newlines_dropped)
    if spill.size < shape.area_start + shape.tail:
        raise ArtifactFactError("size", spill.size)
    result = kept(shape, spill.written)
    text = marker(result, spill.written, newlines_dropped, head_ends_line)
    target = shape.head + len(text)
    move = Move(spill.size - shape.tail, target, shape.tail)
    return Finish(result, text, move, target + shape.tail)


def marker(result: Kept, total: int, newlines_dropped: int, head_ends_line: bool) -> bytes:
    """The marker line between the head and the tail (after a line break of its own when the head ends inside a
    line: the marker's counts say where the head ends, so that break is never taken for output)."""
    text = (
        f"[eukhe: artifact_max_bytes left out {result.dropped} bytes ({newlines_dropped} newlines) here, of {total}; "
        f"above: the first {result.head} bytes, below: the last {result.tail}]\n"
    )
    return (b"" if head_ends_line else b"\n") + text.encode("ascii")


def provisional_marker(head_ends_line: bool) -> bytes:
    """The slot's text while the output is written: a marker padded to MARKER_ROOM bytes whose count is not known
    yet (what a reader finds if the writer never finishes)."""
    text = "[eukhe: artifact_max_bytes leaves out bytes here; the writer did not finish, so how many is not known]"
    line = (b"" if head_ends_line else b"\n") + text.encode("ascii")
    return line + b" " * (MARKER_ROOM - len(line) - 1) + b"\n"
