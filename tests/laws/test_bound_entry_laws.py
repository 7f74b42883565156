"""The bounder's entry laws: on every request the shell writes, `bound.answer` gives the model's answer; on any
other input, one exact typed refusal."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import bound
from eukhe.core.bound import BoundRefusal, BoundRefusalReason, Keep, OutputLimits
from eukhe.output import count_text, read_facts
from tests.laws.bound_support import chunked, limits_st, small_limits, small_texts, stepper_after, texts


def refused(reason: BoundRefusalReason) -> BoundRefusal:
    return BoundRefusal(reason)


# --- Well-formed requests get the model's answer --------------------------------------------------------------------


@given(texts, limits_st)
def test_bound_ffi_slice(text: bytes, limits: OutputLimits) -> None:
    facts = read_facts(text, limits)
    reply = bound.answer(bound.WindowRequest(limits, facts))
    kept = bound.window(limits, facts)
    assert reply == bound.WindowReply(kept, bound.measure(kept, len(text), len(facts.line_lengths)))


def test_bound_ffi_slice_small_scope() -> None:
    for limits in small_limits():
        for text in small_texts(4):
            facts = read_facts(text, limits)
            kept = bound.window(limits, facts)
            expected = bound.WindowReply(kept, bound.measure(kept, len(text), len(facts.line_lengths)))
            assert bound.answer(bound.WindowRequest(limits, facts)) == expected


@given(st.sampled_from(list(Keep)), st.builds(bound.Slice, *[st.integers(0, 2**64)] * 4), st.none() | st.text())
def test_bound_ffi_notice(keep: Keep, counts: bound.Slice, artifact: str | None) -> None:
    assert bound.answer(bound.NoticeRequest(keep, counts, artifact)) == bound.notice(keep, counts, artifact)


@given(limits_st)
def test_bound_open_answers(limits: OutputLimits) -> None:
    assert bound.answer(bound.OpenRequest(limits)) == bound.Stepper(limits)


@given(limits_st, chunked(), texts)
def test_bound_step_out(limits: OutputLimits, before: list[bytes], text: bytes) -> None:
    stepper, _, _ = stepper_after(limits, before)
    counts = count_text(text)
    assert bound.answer(bound.OutRequest(stepper, counts)) == bound.step_out(stepper, counts)


@given(limits_st, chunked(), texts)
def test_bound_step_skip(limits: OutputLimits, before: list[bytes], text: bytes) -> None:
    stepper, _, _ = stepper_after(limits, before)
    counts = count_text(text)
    reply = bound.answer(bound.SkipRequest(stepper, counts))
    if limits.keep is Keep.HEAD and not stepper.full and text:
        assert reply == refused(BoundRefusalReason.SKIP_WOULD_LOSE)
    else:
        assert reply == bound.step_skip(stepper, counts)


@given(limits_st, chunked())
def test_bound_step_look(limits: OutputLimits, chunks: list[bytes]) -> None:
    stepper, store, inside = stepper_after(limits, chunks)
    facts = read_facts(store, limits, inside)
    assert bound.answer(bound.LookRequest(stepper, facts)) == bound.step_look(stepper, facts)
    shut = bound.answer(bound.ShutRequest(stepper, facts))
    assert shut == bound.ShutReply(replace(stepper, closed=True), bound.step_look(stepper, facts))


# --- Malformed requests get one exact refusal -----------------------------------------------------------------------


def bad_limits(max_bytes: object, max_lines: object, keep: object = Keep.TAIL) -> OutputLimits:
    """Limits that skipped validation, as a corrupted request would carry them."""
    limits = OutputLimits(1, 1)
    object.__setattr__(limits, "max_bytes", max_bytes)
    object.__setattr__(limits, "max_lines", max_lines)
    object.__setattr__(limits, "keep", keep)
    return limits


BAD_LIMITS = [bad_limits(-1, 1), bad_limits(1, -1), bad_limits("1", 1), bad_limits(1, True), bad_limits(1, 1, "tail")]


@pytest.mark.parametrize("limits", BAD_LIMITS)
def test_bound_open_refuses(limits: OutputLimits) -> None:
    assert bound.answer(bound.OpenRequest(limits)) == refused(BoundRefusalReason.BAD_LIMITS)
    assert bound.answer(bound.WindowRequest(limits, bound.TextFacts(()))) == refused(BoundRefusalReason.BAD_LIMITS)
    assert bound.answer(bound.OpenRequest("limits")) == refused(BoundRefusalReason.BAD_LIMITS)  # type: ignore[arg-type]


def test_the_limits_record_refuses_bad_values_at_construction() -> None:
    for args in [(-1, 1), (1, -1), (1.5, 1), (True, 1)]:
        with pytest.raises(ValueError):
            OutputLimits(*args)  # type: ignore[arg-type]


@given(limits_st, chunked())
def test_bound_shut_refuses(limits: OutputLimits, chunks: list[bytes]) -> None:
    stepper, store, inside = stepper_after(limits, chunks)
    facts = read_facts(store, limits, inside)
    shut = bound.answer(bound.ShutRequest(stepper, facts))
    assert isinstance(shut, bound.ShutReply)
    closed = shut.stepper
    for request in (
        bound.OutRequest(closed, count_text(b"x")),
        bound.SkipRequest(closed, count_text(b"")),
        bound.LookRequest(closed, facts),
        bound.ShutRequest(closed, facts),
    ):
        assert bound.answer(request) == refused(BoundRefusalReason.CLOSED)


BAD_TEXTS = [
    bound.TextCounts(-1, 0, False),
    bound.TextCounts(3, 4, False),
    bound.TextCounts(0, 0, True),
    bound.TextCounts(3, 0, True),
    bound.TextCounts(3, 3, False),
]


@given(limits_st, chunked(), st.sampled_from(BAD_TEXTS))
def test_bound_step_refuses(limits: OutputLimits, chunks: list[bytes], text: bound.TextCounts) -> None:
    stepper, store, inside = stepper_after(limits, chunks)
    assert bound.answer(bound.OutRequest(stepper, text)) == refused(BoundRefusalReason.BAD_TEXT)
    assert bound.answer(bound.SkipRequest(stepper, text)) == refused(BoundRefusalReason.BAD_TEXT)
    # Facts that do not describe the store.
    wrong = bound.TextFacts((*read_facts(store, limits, inside).line_lengths, 1))
    assert bound.answer(bound.LookRequest(stepper, wrong)) == refused(BoundRefusalReason.STORE_MISMATCH)
    # A cut longer than the cap.
    too_long = replace(read_facts(store, limits, inside), cut=limits.max_bytes + 1)
    assert bound.answer(bound.LookRequest(stepper, too_long)) == refused(BoundRefusalReason.BAD_CUT)


def test_bound_step_refuses_a_skip_into_a_heads_window() -> None:
    stepper = bound.Stepper(OutputLimits(10, 5, Keep.HEAD))
    assert bound.answer(bound.SkipRequest(stepper, count_text(b"abc"))) == refused(BoundRefusalReason.SKIP_WOULD_LOSE)


MALFORMED = [None, 0, "out", b"window", {"op": "open"}, bound.TextFacts(()), bound.Stepper(OutputLimits(1, 1))]


@pytest.mark.parametrize("request_value", MALFORMED, ids=repr)
def test_bound_ffi_malformed_exact(request_value: object) -> None:
    assert bound.answer(request_value) == refused(BoundRefusalReason.NOT_A_REQUEST)


@given(st.integers(-5, 5), st.booleans())
def test_bound_ffi_malformed_exact_facts(length: int, inside: bool) -> None:
    limits = OutputLimits(4, 4)
    facts = bound.TextFacts((length,), inside)
    reply = bound.answer(bound.WindowRequest(limits, facts))
    if length <= 0:
        assert reply == refused(BoundRefusalReason.BAD_TEXT)
    elif inside:
        assert reply == refused(BoundRefusalReason.BAD_TEXT)  # a whole text never begins inside a line
    else:
        assert isinstance(reply, bound.WindowReply)


def test_bound_entry_example() -> None:
    """Anchors on the exact requests the shell sends for a small tail output."""
    limits = OutputLimits(max_bytes=8, max_lines=2, keep=Keep.TAIL)
    text = b"one\ntwo\nthree\n"
    facts = read_facts(text, limits)
    assert facts == bound.TextFacts((4, 4, 6), False, 6)
    assert bound.answer(bound.WindowRequest(limits, facts)) == bound.WindowReply(
        bound.Window(start=8, end=14, lines=1, cut=False), bound.Slice(6, 8, 1, 2)
    )
    stepper = bound.answer(bound.OpenRequest(limits))
    assert stepper == bound.Stepper(limits)
    assert isinstance(stepper, bound.Stepper)
    out = bound.answer(bound.OutRequest(stepper, bound.TextCounts(14, 3, True)))
    assert out == bound.OutAnswer(bound.Stepper(limits, 14, 14, 3, True), take=14, trim=0)
    out2 = bound.answer(bound.OutRequest(out.stepper, bound.TextCounts(10, 0, False)))  # type: ignore[union-attr]
    assert out2 == bound.OutAnswer(bound.Stepper(limits, 11, 24, 3, False), take=10, trim=13)
    assert bound.answer(bound.NoticeRequest(Keep.TAIL, bound.Slice(6, 8, 1, 2), "/tmp/a.log")) == (
        "[output truncated: 8 bytes (2 lines) dropped from the start; kept the last 6 bytes (1 line); "
        "full output: /tmp/a.log]"
    )
