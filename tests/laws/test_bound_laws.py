"""The bounder's laws (S2 "The tool output bounder"): each over free inputs (Hypothesis) and exhaustively over a
small scope (every text up to 5 bytes over an alphabet with a newline, a two-byte character and an invalid byte,
under every limit up to 5 bytes and 3 lines)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import bound
from eukhe.core.bound import Keep, OutputLimits
from eukhe.output import count_text, read_facts
from tests.laws.bound_support import (
    chunked,
    chunkings,
    limits_st,
    margin_texts,
    reads_the_whole_window,
    reference_lines,
    reference_lines_kept,
    reference_margin,
    reference_marks,
    reference_reading,
    reference_window,
    reference_window_range,
    small_limits,
    small_texts,
    stepper_after,
    texts,
    texts_around_the_cap,
)

SMALL = [(text, limits) for limits in small_limits() for text in small_texts()]


def whole(text: bytes, limits: OutputLimits) -> tuple[bound.Window, bound.Slice]:
    """The core's window and counts of a whole text, from the facts the shell reads."""
    facts = read_facts(text, limits)
    kept = bound.window(limits, facts)
    return kept, bound.measure(kept, len(text), len(facts.line_lengths))


# --- bound_*_exact: the window, the keep, the slice, the margin and the notice are exactly their specs -----------


def check_keep_exact(text: bytes, limits: OutputLimits) -> None:
    lines = reference_lines(text)
    ordered = lines if limits.keep is Keep.HEAD else lines[::-1]
    expected = max(
        count
        for count in range(len(lines) + 1)
        if count <= limits.max_lines and sum(map(len, ordered[:count])) <= limits.max_bytes
    )
    assert bound.whole_lines_kept(limits, read_facts(text, limits)) == expected


def check_window_exact(text: bytes, limits: OutputLimits) -> None:
    kept, _ = whole(text, limits)
    assert text[kept.start : kept.end] == reference_window(text, limits)
    assert kept.lines == reference_lines_kept(text, limits)


def check_slice_exact(text: bytes, limits: OutputLimits) -> None:
    _, counts = whole(text, limits)
    window_bytes = reference_window(text, limits)
    total_lines = len(reference_lines(text))
    assert counts == bound.Slice(
        len(window_bytes),
        len(text) - len(window_bytes),
        reference_lines_kept(text, limits),
        total_lines - reference_lines_kept(text, limits),
    )


def test_bound_keep_exact_small_scope() -> None:
    for text, limits in SMALL:
        check_keep_exact(text, limits)


@given(texts, limits_st)
def test_bound_keep_exact(text: bytes, limits: OutputLimits) -> None:
    check_keep_exact(text, limits)


def test_bound_window_exact_small_scope() -> None:
    for text, limits in SMALL:
        check_window_exact(text, limits)


@given(texts, limits_st)
def test_bound_window_exact(text: bytes, limits: OutputLimits) -> None:
    check_window_exact(text, limits)


def test_bound_slice_exact_small_scope() -> None:
    for text, limits in SMALL:
        check_slice_exact(text, limits)


@given(texts, limits_st)
def test_bound_slice_exact(text: bytes, limits: OutputLimits) -> None:
    check_slice_exact(text, limits)


MARGIN_FAMILY = margin_texts()
"""Every text of up to 5 pieces over a newline and characters of 1, 2 and 4 bytes (1365 texts)."""


def keeps_anything(limits: OutputLimits) -> bool:
    """Whether a window under these limits can hold a byte (a cap of 0 bytes or 0 lines keeps nothing)."""
    return limits.max_bytes >= 1 and limits.max_lines >= 1


@functools.cache
def reference_context() -> int:
    """The bytes beyond the cap a store must hold to read every window as the whole output reads it, found by brute
    force over the small scope's caps that keep anything: one number for all of them."""
    caps = filter(keeps_anything, small_limits())
    contexts = {reference_margin(limits, MARGIN_FAMILY) - limits.max_bytes for limits in caps}
    assert len(contexts) == 1, contexts
    return contexts.pop()


def test_bound_margin_exact_small_scope() -> None:
    """The margin is the least store that reads every text's window as the whole text does (brute force over every
    text of the family, every cap up to 5 bytes and 3 lines); a cap that keeps nothing has the same context."""
    every = list(small_limits())
    for limits in filter(keeps_anything, every):
        assert bound.margin(limits) == reference_margin(limits, MARGIN_FAMILY), limits
    for limits in itertools.filterfalse(keeps_anything, every):
        assert bound.margin(limits) == limits.max_bytes + reference_context(), limits


@given(limits_st, texts)
def test_bound_margin_exact(limits: OutputLimits, text: bytes) -> None:
    """Any cap: a store of the margin's bytes reads the whole text's window, and one byte less misreads a text with
    a character across the cap."""
    margin = bound.margin(limits)
    assert reads_the_whole_window(text, limits, margin)
    if keeps_anything(limits):
        around = texts_around_the_cap(limits)
        assert all(reads_the_whole_window(near, limits, margin) for near in around)
        assert not all(reads_the_whole_window(near, limits, margin - 1) for near in around)
    else:
        assert margin == limits.max_bytes + reference_context()


NOTICE_EXAMPLES = [
    (
        Keep.TAIL,
        bound.Slice(10, 90, 2, 18),
        "/a/out.log",
        "[output truncated: 90 bytes (18 lines) dropped from the start; kept the last 10 bytes (2 lines); "
        "full output: /a/out.log]",
    ),
    (
        Keep.HEAD,
        bound.Slice(1, 1, 1, 0),
        None,
        "[output truncated: 1 byte (0 lines) dropped from the end; kept the first 1 byte (1 line); "
        "the full output was not saved]",
    ),
    (Keep.HEAD, bound.Slice(5, 0, 1, 0), "/x", None),
]


@pytest.mark.parametrize(("keep", "counts", "artifact", "expected"), NOTICE_EXAMPLES)
def test_bound_notice_exact_examples(keep: Keep, counts: bound.Slice, artifact: str | None, expected: str) -> None:
    assert bound.notice(keep, counts, artifact) == expected


@given(
    st.sampled_from(list(Keep)),
    st.builds(bound.Slice, *[st.integers(0, 10**12)] * 4),
    st.one_of(st.none(), st.text(max_size=30)),
)
def test_bound_notice_exact(keep: Keep, counts: bound.Slice, artifact: str | None) -> None:
    text = bound.notice(keep, counts, artifact)
    if counts.bytes_dropped == 0 and counts.lines_dropped == 0:
        assert text is None
        return
    assert text is not None
    assert text.startswith("[output truncated: ") and text.endswith("]")
    assert f"{counts.bytes_dropped} byte" in text and f"{counts.lines_dropped} line" in text
    assert ("from the start" in text) == (keep is Keep.TAIL)
    assert ("from the end" in text) == (keep is Keep.HEAD)
    assert text.endswith(f"full output: {artifact}]" if artifact is not None else "the full output was not saved]")


# --- bound_window_within, bound_window_keeps_what_fits, bound_slice_conserves -------------------------------------


def check_within(text: bytes, limits: OutputLimits) -> None:
    kept, _ = whole(text, limits)
    assert kept.size <= limits.max_bytes
    assert kept.lines <= limits.max_lines


def check_keeps_what_fits(text: bytes, limits: OutputLimits) -> None:
    kept, counts = whole(text, limits)
    fits = len(text) <= limits.max_bytes and len(reference_lines(text)) <= limits.max_lines
    if fits:
        assert (kept.start, kept.end) == (0, len(text))
        assert counts.bytes_dropped == 0 and counts.lines_dropped == 0
    else:
        assert counts.truncated


def check_conserves(text: bytes, limits: OutputLimits) -> None:
    """Every byte and every line, marked one by one, is either in the window or dropped, never both: the counts
    are those marks, for the window the core hands out and for the reference window."""
    kept, counts = whole(text, limits)
    marks = (counts.bytes_kept, counts.bytes_dropped, counts.lines_kept, counts.lines_dropped)
    assert marks == reference_marks(text, (kept.start, kept.end))
    assert marks == reference_marks(text, reference_window_range(text, limits))
    assert counts.bytes_kept + counts.bytes_dropped == len(text)
    assert counts.lines_kept + counts.lines_dropped == len(reference_lines(text))


def test_bound_window_within_small_scope() -> None:
    for text, limits in SMALL:
        check_within(text, limits)


@given(texts, limits_st)
def test_bound_window_within(text: bytes, limits: OutputLimits) -> None:
    check_within(text, limits)


def test_bound_window_keeps_what_fits_small_scope() -> None:
    for text, limits in SMALL:
        check_keeps_what_fits(text, limits)


@given(texts, limits_st)
def test_bound_window_keeps_what_fits(text: bytes, limits: OutputLimits) -> None:
    check_keeps_what_fits(text, limits)


def test_bound_slice_conserves_small_scope() -> None:
    for text, limits in SMALL:
        check_conserves(text, limits)


@given(texts, limits_st)
def test_bound_slice_conserves(text: bytes, limits: OutputLimits) -> None:
    check_conserves(text, limits)


# --- The stepper: bound_out_exact, bound_skip_exact, bound_look_exact, bound_steps_whole, bound_head_full_keeps ---


def check_out_exact(limits: OutputLimits, before: list[bytes], text: bytes) -> None:
    stepper, store, _ = stepper_after(limits, before)
    reply = bound.step_out(stepper, count_text(text))
    output = b"".join(before) + text
    m = bound.margin(limits)
    if limits.keep is Keep.HEAD:
        assert reply.take == min(len(text), max(0, m - stepper.stored)) and reply.trim == 0
        assert (store + text[: reply.take]) == output[: min(len(output), m)][: stepper.stored + reply.take]
    else:
        assert reply.take == len(text)
        grown = stepper.stored + len(text)
        assert reply.trim == (grown - m if grown > 2 * m else 0)
        kept = (store + text)[reply.trim :]
        assert output.endswith(kept) and len(kept) <= 2 * m and len(kept) >= min(len(output), m)
    assert reply.stepper.total_bytes == len(output)
    assert reply.stepper.total_lines == len(reference_lines(output))
    assert reply.stepper.stored == stepper.stored + reply.take - reply.trim


def check_skip_exact(limits: OutputLimits, before: list[bytes], text: bytes) -> None:
    stepper, _, _ = stepper_after(limits, before)
    reply = bound.step_skip(stepper, count_text(text))
    output = b"".join(before) + text
    assert reply.stepper.total_bytes == len(output)
    assert reply.stepper.total_lines == len(reference_lines(output))
    clears = limits.keep is Keep.TAIL and len(text) > 0
    assert reply.clears == clears
    assert reply.stepper.stored == (0 if clears else stepper.stored)


def check_look_exact(limits: OutputLimits, chunks: list[bytes]) -> None:
    """A look reads the store's window (by brute force over the store's bytes: a tail's store may begin inside a
    line) and counts it against the whole output so far (its bytes and lines, counted from the output itself)."""
    output = b"".join(chunks)
    stepper, store, inside = stepper_after(limits, chunks)
    reading = bound.step_look(stepper, read_facts(store, limits, inside))
    expected = reference_reading(store, limits, inside)
    start = 0 if limits.keep is Keep.HEAD else len(store) - len(expected.kept)
    window = reading.window
    assert (window.start, window.end, window.lines) == (start, start + len(expected.kept), expected.lines)
    total_lines = len(reference_lines(output))
    assert reading.counts == bound.Slice(
        len(expected.kept), len(output) - len(expected.kept), expected.lines, total_lines - expected.lines
    )


def check_steps_whole(limits: OutputLimits, chunks: list[bytes]) -> None:
    output = b"".join(chunks)
    stepper, store, inside = stepper_after(limits, chunks)
    reading = bound.step_look(stepper, read_facts(store, limits, inside))
    expected_window, expected_counts = whole(output, limits)
    assert store[reading.window.start : reading.window.end] == output[expected_window.start : expected_window.end]
    assert reading.counts == expected_counts


def check_head_full_keeps(limits: OutputLimits, chunks: list[bytes]) -> None:
    head = replace(limits, keep=Keep.HEAD)
    stepper = bound.Stepper(head)
    store = b""
    for index, chunk in enumerate(chunks):
        if stepper.full:
            # What the head stored already holds the whole output's window: nothing dropped from here on is in it.
            output = b"".join(chunks)
            reading = bound.step_look(stepper, read_facts(store, head))
            kept, _ = whole(output, head)
            assert store[reading.window.start : reading.window.end] == output[kept.start : kept.end]
            assert kept.end <= len(b"".join(chunks[:index]))
            return
        reply = bound.step_out(stepper, count_text(chunk))
        store += chunk[: reply.take]
        stepper = reply.stepper


def test_bound_out_exact_small_scope() -> None:
    for limits in small_limits():
        for text in small_texts(4):
            for chunks in chunkings(text):
                if chunks:
                    check_out_exact(limits, chunks[:-1], chunks[-1])


@given(limits_st, chunked(), texts)
def test_bound_out_exact(limits: OutputLimits, before: list[bytes], text: bytes) -> None:
    check_out_exact(limits, before, text)


def test_bound_skip_exact_small_scope() -> None:
    for limits in small_limits():
        for text in small_texts(4):
            for chunks in chunkings(text):
                if chunks:
                    check_skip_exact(limits, chunks[:-1], chunks[-1])


@given(limits_st, chunked(), texts)
def test_bound_skip_exact(limits: OutputLimits, before: list[bytes], text: bytes) -> None:
    check_skip_exact(limits, before, text)


def test_bound_look_exact_small_scope() -> None:
    for limits in small_limits():
        for text in small_texts(4):
            for chunks in chunkings(text):
                check_look_exact(limits, chunks)


@given(limits_st, chunked())
def test_bound_look_exact(limits: OutputLimits, chunks: list[bytes]) -> None:
    check_look_exact(limits, chunks)


def test_bound_steps_whole_small_scope() -> None:
    for limits in small_limits():
        for text in small_texts(4):
            for chunks in chunkings(text):
                check_steps_whole(limits, chunks)


@given(limits_st, chunked())
def test_bound_steps_whole(limits: OutputLimits, chunks: list[bytes]) -> None:
    check_steps_whole(limits, chunks)


@given(
    limits_st,
    chunked(st.lists(st.sampled_from([b"ab\n", b"\xe2\x82\xac", b"\n", b"x" * 9]), max_size=40).map(b"".join)),
)
def test_bound_head_full_keeps(limits: OutputLimits, chunks: list[bytes]) -> None:
    check_head_full_keeps(limits, chunks)


def test_bound_head_full_keeps_small_scope() -> None:
    for limits in small_limits():
        for text in small_texts(4):
            for chunks in chunkings(text):
                check_head_full_keeps(limits, chunks)


def test_bound_steps_whole_small_scope_reaching_trims() -> None:
    """Texts of 7 bytes cut in two, under caps whose twice-margin is at most 6: every tail here trims its store."""
    for limits in (OutputLimits(b, n, k) for b in (0, 1, 2) for n in (1, 2) for k in Keep):
        for combo in itertools.product([b"a", b"\n", b"\xe9"], repeat=7):
            text = b"".join(combo)
            for cut in range(1, 7):
                check_steps_whole(limits, [text[:cut], text[cut:]])


def test_bound_steps_whole_reads_the_same_cuts_as_the_whole_output() -> None:
    """A four-byte character at every offset around the cap: the store keeps enough context to cut where the whole
    output cuts (the 'Tested, not proven' part of the spec: the cuts read in the store are the whole output's)."""
    emoji = "\N{GRINNING FACE}".encode()
    for keep in Keep:
        for max_bytes in range(1, 7):
            limits = OutputLimits(max_bytes, 1, keep)
            for before in range(14):
                for after in range(8):
                    text = b"a" * before + emoji + b"b" * after
                    for cut in range(len(text) + 1):
                        check_steps_whole(limits, [text[:cut], text[cut:]])


def test_bound_head_full_keeps_a_character_across_the_cap() -> None:
    """A four-byte character at every offset around a head's cap, fed byte by byte: a full head already holds it."""
    emoji = "\N{GRINNING FACE}".encode()
    for max_bytes in range(1, 7):
        for before in range(10):
            text = b"a" * before + emoji + b"b" * 6
            check_head_full_keeps(OutputLimits(max_bytes, 1, Keep.HEAD), [text[i : i + 1] for i in range(len(text))])
