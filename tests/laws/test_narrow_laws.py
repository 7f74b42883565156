"""Laws of narrowing a kept window for a reader that takes less (`eukhe.core.bound.narrowed`, what `eukhe mcp`
asks for a client with a small room): the counts still add up over the whole output, the window is within the new
limits, and a window that fits is kept whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import bound
from eukhe.core.bound import Keep, OutputLimits, Slice
from eukhe.output import read_facts

lines = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"), max_size=30)


limits_of = st.builds(OutputLimits, st.integers(0, 200), st.integers(0, 40), st.sampled_from(Keep))


@given(lines, limits_of, st.integers(0, 10**6), st.integers(0, 10))
def test_narrow_kept_plus_dropped_is_the_whole_output(
    pieces: list[bytes], limits: OutputLimits, dropped_bytes: int, dropped_lines: int
) -> None:
    raw = b"".join(pieces)
    before = Slice(len(raw), dropped_bytes, len(pieces), dropped_lines)
    _, counts = bound.narrowed(limits, read_facts(raw, limits), before)
    assert counts.bytes_kept + counts.bytes_dropped == len(raw) + dropped_bytes
    assert counts.lines_kept + counts.lines_dropped == len(pieces) + dropped_lines
    assert counts.bytes_dropped >= dropped_bytes


@given(lines, st.integers(1, 200), st.integers(1, 40), st.sampled_from(Keep))
def test_narrow_window_within_the_new_limits(pieces: list[bytes], max_bytes: int, max_lines: int, keep: Keep) -> None:
    raw = b"".join(pieces)
    limits = OutputLimits(max_bytes, max_lines, keep)
    kept, _ = bound.narrowed(limits, read_facts(raw, limits), Slice(len(raw), 0, len(pieces), 0))
    assert kept.size <= max_bytes
    assert kept.lines <= max_lines
    assert (kept.start == 0) if keep is Keep.HEAD else (kept.end == len(raw))


@given(lines, st.sampled_from(Keep))
def test_narrow_a_window_that_fits_is_kept_whole(pieces: list[bytes], keep: Keep) -> None:
    raw = b"".join(pieces)
    limits = OutputLimits(len(raw), len(pieces), keep)
    kept, counts = bound.narrowed(limits, read_facts(raw, limits), Slice(len(raw), 7, len(pieces), 1))
    assert (kept.start, kept.end) == (0, len(raw))
    assert (counts.bytes_dropped, counts.lines_dropped) == (7, 1)
