"""The one line splitter (daemon requests, kernel frames): whole input, byte by byte and random chunks give the same
pieces (h11 test_io style)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.gate import GateLimits, piece_of
from eukhe.core.lines import Line, LineSplitter, Oversized, Piece


def split_all(data: bytes, cuts: list[int], limits: GateLimits) -> list[Piece]:
    splitter = LineSplitter(limits.line, limits.head)
    pieces: list[Piece] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        pieces.extend(splitter.feed(data[start:cut]))
        start = max(start, cut)
    return pieces


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    st.lists(st.integers(0, 400), max_size=10),
    st.integers(1, 30),
    st.integers(1, 12),
)
def test_any_chunking_gives_the_pieces_of_the_whole_lines(
    lines: list[bytes], cuts: list[int], line_limit: int, head: int
) -> None:
    limits = GateLimits(line=line_limit, head=head)
    data = b"".join(line + b"\n" for line in lines)
    expected = [piece_of(line, limits) for line in lines]
    assert split_all(data, cuts, limits) == expected
    assert split_all(data, list(range(len(data))), limits) == expected


def test_an_oversized_line_is_counted_not_kept() -> None:
    limits = GateLimits(line=1000, head=16)
    splitter = LineSplitter(limits.line, limits.head)
    assert splitter.feed(b"a" * 999) == []
    assert splitter.feed(b"b" * 10) == []
    assert splitter.pending == 1009
    rng = random.Random(7)
    total = 1009
    for _ in range(200):
        chunk = b"c" * rng.randint(1, 50_000)
        total += len(chunk)
        assert splitter.feed(chunk) == []
    assert splitter.feed(b"d\nok\n") == [Oversized(b"a" * 16, total + 1), Line(b"ok")]
    assert splitter.pending == 0


def test_a_line_exactly_at_the_limit_is_whole() -> None:
    limits = GateLimits(line=5, head=2)
    assert LineSplitter(limits.line, limits.head).feed(b"12345\n123456\n") == [Line(b"12345"), Oversized(b"12", 6)]
