"""Laws of eukhe.core.pictures (a cell's images, docs/mcp.md "Pictures"): which images an answer shows, saves or only
counts, checked exhaustively over small limits and every short sequence of sizes, and with Hypothesis beyond."""

from __future__ import annotations

import itertools
import struct

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.pictures import PNG_SIGNATURE, Limits, Tally, Verdict, admit, admit_all, image_size, notice

SMALL_LIMITS = [
    Limits(max_image_bytes=b, max_shown=s, max_saved=v) for b in range(3) for s in range(3) for v in range(4)
]
SMALL_SEQUENCES = [seq for n in range(6) for seq in itertools.product(range(4), repeat=n)]

limits_st = st.builds(
    Limits, max_image_bytes=st.integers(0, 100), max_shown=st.integers(0, 10), max_saved=st.integers(0, 20)
)
sizes_st = st.lists(st.integers(0, 150), max_size=40)


def model(sizes: tuple[int, ...] | list[int], limits: Limits) -> list[Verdict]:
    """The table of eukhe.core.pictures, written the other way: by counting what came before each image."""
    verdicts: list[Verdict] = []
    for size in sizes:
        saved = sum(v is not Verdict.DROP for v in verdicts)
        shown = verdicts.count(Verdict.SHOW)
        if saved >= limits.max_saved:
            verdicts.append(Verdict.DROP)
        elif size > limits.max_image_bytes:
            verdicts.append(Verdict.TOO_LARGE)
        elif shown >= limits.max_shown:
            verdicts.append(Verdict.OVER_COUNT)
        else:
            verdicts.append(Verdict.SHOW)
    return verdicts


def check_counts(sizes: tuple[int, ...] | list[int], limits: Limits) -> None:
    tally, verdicts = admit_all(sizes, limits)
    assert tally.shown <= limits.max_shown
    assert tally.saved <= limits.max_saved
    assert tally.shown + tally.too_large + tally.over_count == tally.saved
    assert tally.saved + tally.dropped == len(sizes)
    assert tally.shown == verdicts.count(Verdict.SHOW)
    assert all(size <= limits.max_image_bytes for size, v in zip(sizes, verdicts, strict=True) if v is Verdict.SHOW)


def test_picture_bound_counts_every_image_exhaustively() -> None:
    for limits in SMALL_LIMITS:
        for sizes in SMALL_SEQUENCES:
            check_counts(sizes, limits)


@given(sizes_st, limits_st)
def test_picture_bound_counts_every_image(sizes: list[int], limits: Limits) -> None:
    check_counts(sizes, limits)


def test_picture_bound_follows_its_table_exhaustively() -> None:
    for limits in SMALL_LIMITS:
        for sizes in SMALL_SEQUENCES:
            assert list(admit_all(sizes, limits)[1]) == model(sizes, limits), (sizes, limits)


@given(sizes_st, limits_st)
def test_picture_bound_follows_its_table(sizes: list[int], limits: Limits) -> None:
    assert list(admit_all(sizes, limits)[1]) == model(sizes, limits)


@given(sizes_st, sizes_st, limits_st)
def test_picture_bound_decides_each_image_once_as_it_comes(first: list[int], later: list[int], limits: Limits) -> None:
    """An image's verdict depends only on the images before it: the answer's later images change no earlier one."""
    assert admit_all(first + later, limits)[1][: len(first)] == admit_all(first, limits)[1]


def test_picture_bound_notice_exactly_when_an_image_is_not_shown_exhaustively() -> None:
    for limits in SMALL_LIMITS:
        for sizes in SMALL_SEQUENCES:
            tally, _ = admit_all(sizes, limits)
            said = notice(tally, limits)
            assert (said is not None) == (tally.shown < len(sizes)), (sizes, limits)
            if said is not None:
                assert said.startswith("[not shown: ") and said.endswith("]")
                assert (str(limits.max_image_bytes) in said) or not tally.too_large
                assert (f"{tally.dropped} image" in said) or not tally.dropped


def test_picture_bound_admit_is_one_step_of_admit_all() -> None:
    limits = Limits(max_image_bytes=10, max_shown=1, max_saved=2)
    assert admit(Tally(), 11, limits) == (Tally(saved=1, too_large=1), Verdict.TOO_LARGE)
    assert admit(Tally(saved=1, too_large=1), 5, limits) == (Tally(shown=1, saved=2, too_large=1), Verdict.SHOW)
    assert admit(Tally(shown=1, saved=2), 5, limits) == (Tally(shown=1, saved=2, dropped=1), Verdict.DROP)


def png_head(width: int, height: int) -> bytes:
    return PNG_SIGNATURE + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height) + b"\x08\x06\0\0\0"


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_picture_size_of_a_png_is_its_ihdr(width: int, height: int) -> None:
    assert image_size(png_head(width, height)) == (width, height)


@given(st.binary(max_size=64))
def test_picture_size_of_anything_else_is_unknown_or_a_pair(data: bytes) -> None:
    found = image_size(data)
    assert found is None or (len(found) == 2 and all(n >= 0 for n in found))
    assert image_size(png_head(3, 4)[:20]) is None  # a head cut inside the IHDR
