"""Laws of an artifact's cap (eukhe.core.artifact, docs/output.md "The artifact's cap"): the closed artifact keeps
the head and the tail, head + tail + dropped == every byte, within the cap, nothing dropped when the output fits,
and its marker states the exact counts; while written, the file never passes the cap and always reads as the
output's head, then its latest bytes in order. A model file (a bytearray) does what the core plans, over free
outputs and chunkings, and every total of small caps is checked exhaustively."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import artifact as core
from eukhe.core.artifact import MARKER_ROOM, MIN_CAP, ArtifactFactError, Shape
from tests.laws.artifact_support import check_closed

SMALL_CAPS = [MIN_CAP, MIN_CAP + 1, MIN_CAP + 2, 5000, 3 * MIN_CAP + 7]


def file_size(shape: Shape | None, total: int, marker_length: int) -> int:
    kept = core.kept(shape, total)
    return kept.head + kept.tail + (marker_length if kept.partial else 0)


def test_artifact_kept_conserves_every_byte_within_the_cap_small_scope() -> None:
    """Every total up to four caps, for small caps and no cap: head + tail + dropped == total; nothing dropped iff
    the output fits; the closed file (with the longest marker) within the cap."""
    for cap in SMALL_CAPS:
        shape = Shape(cap)
        for total in range(4 * cap):
            kept = core.kept(shape, total)
            assert kept.head + kept.tail + kept.dropped == total
            assert kept.partial == (total > cap)
            assert file_size(shape, total, MARKER_ROOM) <= cap
            if kept.partial:
                assert kept.head == kept.tail == (cap - MARKER_ROOM) // 4
    for total in range(3000):
        assert core.kept(None, total) == core.Kept(total, 0, 0)


@given(st.integers(MIN_CAP, 1 << 40), st.integers(0, 1 << 62))
def test_artifact_kept_conserves_every_byte_within_the_cap(cap: int, total: int) -> None:
    shape = Shape(cap)
    kept = core.kept(shape, total)
    assert kept.head + kept.tail + kept.dropped == total
    assert kept.partial == (total > cap)
    assert file_size(shape, total, MARKER_ROOM) <= cap


def test_artifact_marker_fits_its_room_for_any_count() -> None:
    biggest = (1 << 64) - 1
    for head_ends_line in (False, True):
        line = core.marker(core.Kept(biggest, biggest, biggest), biggest, biggest, head_ends_line)
        assert len(line) <= MARKER_ROOM
        provisional = core.provisional_marker(head_ends_line)
        assert len(provisional) == MARKER_ROOM
        assert provisional.startswith(b"[" if head_ends_line else b"\n[") and provisional.endswith(b"\n")
        assert provisional.rstrip(b" \n").endswith(b"]") and provisional.count(b"\n") == (1 if head_ends_line else 2)


@pytest.mark.parametrize("cap", [MIN_CAP - 1, 0, -1, True, 4096.0])
def test_artifact_shape_refuses_a_cap_below_the_minimum(cap: object) -> None:
    with pytest.raises(ArtifactFactError):
        Shape(cap)  # type: ignore[arg-type]


def test_artifact_steps_refuse_what_no_writer_does() -> None:
    spill = core.Spill(Shape(MIN_CAP))
    with pytest.raises(ArtifactFactError):
        core.appended(spill, MIN_CAP + 1)  # past the room
    with pytest.raises(ArtifactFactError):
        core.appended(spill, -1)
    with pytest.raises(ArtifactFactError):
        core.compact(core.appended(spill, MIN_CAP - 1))  # not full
    with pytest.raises(ArtifactFactError):
        core.compact(core.Spill(None))
    assert core.finish(core.appended(spill, MIN_CAP), 0, True) is None  # fits: the file is the output


@dataclass
class ModelFile:
    """The artifact's file as a bytearray, doing what the core plans; it checks the laws after every step."""

    output: bytes
    shape: Shape | None
    file: bytearray
    spill: core.Spill

    def write(self, data: bytes) -> None:
        while True:
            room = self.spill.room
            take = len(data) if room is None else min(room, len(data))
            self.file += data[:take]
            self.spill = core.appended(self.spill, take)
            data = data[take:]
            self.check()
            if not data:
                return
            self.compact()

    def compact(self) -> None:
        plan = core.compact(self.spill)
        move, shape = plan.move, plan.spill.shape
        assert shape is not None
        assert move.source >= move.target + move.length, "a compaction's ranges never overlap"
        self.file[move.target : move.target + move.length] = self.file[move.source : move.source + move.length]
        if plan.first:
            self.file[shape.head : shape.area_start] = core.provisional_marker(self.file[shape.head - 1] == 0x0A)
        del self.file[plan.cut :]
        self.spill = plan.spill
        self.check()

    def check(self) -> None:
        """While written: within the cap; the output's head, then its latest bytes in order."""
        written = self.spill.written
        assert len(self.file) == self.spill.size
        shape = self.shape
        if shape is None or not self.spill.passed:
            assert written <= (written if shape is None else shape.cap)
            assert self.file == self.output[:written]
            assert self.spill.dropped == 0
            return
        assert len(self.file) <= shape.cap
        assert self.file[: shape.head] == self.output[: shape.head]
        assert self.file[shape.head : shape.area_start] == core.provisional_marker(self.output[shape.head - 1] == 10)
        area = len(self.file) - shape.area_start
        assert area >= shape.tail
        assert self.file[shape.area_start :] == self.output[written - area : written]
        assert self.spill.dropped == written - shape.head - area

    def close(self) -> bytes:
        shape = self.shape
        kept = core.kept(shape, len(self.output))
        middle = self.output[kept.head : len(self.output) - kept.tail]
        head_ends_line = kept.head > 0 and self.output[kept.head - 1] == 0x0A
        plan = core.finish(self.spill, middle.count(b"\n"), head_ends_line)
        if plan is None:
            assert not kept.partial
            return bytes(self.file)
        assert shape is not None and plan.kept == kept
        move = plan.move
        assert move.target <= move.source, "the close's move is a forward copy"
        self.file[shape.head : shape.head + len(plan.marker)] = plan.marker
        for offset in range(move.length):  # byte by byte from the front, as a forward copy does
            self.file[move.target + offset] = self.file[move.source + offset]
        del self.file[plan.cut :]
        return bytes(self.file)


def written_through(output: bytes, cap: int, chunks: list[int]) -> bytes:
    shape = core.shape_of(cap)
    model = ModelFile(output, shape, bytearray(), core.Spill(shape))
    position = 0
    for size in [*chunks, len(output)]:
        model.write(output[position : position + size])
        position += size
        if position >= len(output):
            break
    return model.close()


outputs = st.lists(st.sampled_from([b"a", b"\n", b"line\n", b"x" * 97, b"\n" * 31]), max_size=400).map(b"".join)


@given(
    st.sampled_from([0, *SMALL_CAPS]),
    st.integers(0, 30_000).flatmap(lambda n: st.binary(min_size=n, max_size=n)) | outputs,
    st.lists(st.integers(0, 9000), max_size=12),
)
def test_artifact_written_in_any_chunks_keeps_head_marker_tail(cap: int, output: bytes, chunks: list[int]) -> None:
    check_closed(output, cap, written_through(output, cap, chunks))


def test_artifact_written_byte_range_small_scope() -> None:
    """Every total around the cap's edges and a few compactions, in one write and in 1000-byte chunks."""
    cap = MIN_CAP
    tail = Shape(cap).tail
    base = bytes((index * 7) % 251 for index in range(cap + 6 * tail))
    edges = {cap - 1, cap, cap + 1, *(cap + k * tail + d for k in range(1, 6) for d in (-1, 0, 1))}
    for total in sorted(edges):
        output = base[:total].replace(b"\x05", b"\n")
        for chunks in ([], [1000] * 40, [cap, 1, tail]):
            check_closed(output, cap, written_through(output, cap, chunks))
