"""The tool-call journal laws (S2 "A tool call" 1, 3) over `core.job.journal`: free call streams (Hypothesis) and
every short stream over a small alphabet (exhaustive).

stream_journals_two        at most two records per call, and no progress event ever makes one
stream_settles_once        exactly one settle, made by the call's first end after its start; none before
stream_settle_carries_all  the settle carries every result byte (counted: the shell's bounded output holds them),
                           every warning (a failure's reason last) and every usage report
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.job import (
    CallBegun,
    CallCancel,
    CallEvent,
    CallFail,
    CallOutput,
    CallProgress,
    CallReturn,
    CallUsage,
    CallWarning,
    SettleRecord,
    StartRecord,
    journal,
    journal_many,
)

events = st.one_of(
    st.just(CallBegun()),
    st.builds(CallOutput, st.integers(0, 9)),
    st.builds(CallWarning, st.text(max_size=4)),
    st.builds(CallUsage, st.lists(st.tuples(st.sampled_from(["in", "out"]), st.integers(0, 9)), max_size=2).map(tuple)),
    st.builds(CallProgress, st.text(max_size=4)),
    st.just(CallReturn()),
    st.just(CallCancel()),
    st.builds(CallFail, st.text(max_size=3)),
)
streams = st.lists(events, max_size=20)

SMALL_ALPHABET: list[CallEvent] = [
    CallBegun(),
    CallOutput(1),
    CallOutput(0),
    CallWarning("w"),
    CallUsage((("in", 1),)),
    CallProgress("p"),
    CallReturn(),
    CallCancel(),
    CallFail("f"),
]


def short_streams(length: int) -> itertools.chain[tuple[CallEvent, ...]]:
    return itertools.chain.from_iterable(itertools.product(SMALL_ALPHABET, repeat=n) for n in range(length + 1))


def first_index(stream: Sequence[CallEvent], kinds: type | tuple[type, ...], after: int = -1) -> int | None:
    for index, event in enumerate(stream):
        if index > after and isinstance(event, kinds):
            return index
    return None


def check_journals_two(stream: Sequence[CallEvent]) -> None:
    records = journal(stream)
    assert len(records) <= 2
    assert all(isinstance(record, StartRecord | SettleRecord) for record in records)
    # a progress update is never journaled: removing every one changes nothing
    assert journal([e for e in stream if not isinstance(e, CallProgress)]) == records
    if records:
        assert isinstance(records[0], StartRecord)


def check_settles_once(stream: Sequence[CallEvent]) -> None:
    start = first_index(stream, CallBegun)
    end = None if start is None else first_index(stream, ENDS, after=start)
    settles = [r for r in journal(stream) if isinstance(r, SettleRecord)]
    assert len(settles) == (1 if end is not None else 0)
    if end is not None:
        # not before its end: the stream up to just before the end has no settle; up to the end has it
        assert not [r for r in journal(stream[:end]) if isinstance(r, SettleRecord)]
        assert journal(stream[: end + 1]) == journal(stream)
        ending = stream[end]
        expected = (
            "returned" if isinstance(ending, CallReturn) else "failed" if isinstance(ending, CallFail) else "cancelled"
        )
        assert settles[0].outcome == expected


def check_settle_carries_all(stream: Sequence[CallEvent]) -> None:
    start = first_index(stream, CallBegun)
    end = None if start is None else first_index(stream, ENDS, after=start)
    if start is None or end is None:
        return
    window = stream[start + 1 : end]
    (settle,) = [r for r in journal(stream) if isinstance(r, SettleRecord)]
    assert settle.written == sum(e.size for e in window if isinstance(e, CallOutput))
    ending = stream[end]
    reason = (ending.reason,) if isinstance(ending, CallFail) else ()
    assert settle.warnings == tuple(e.text for e in window if isinstance(e, CallWarning)) + reason
    assert settle.usage == tuple(e.usage for e in window if isinstance(e, CallUsage))


ENDS = (CallReturn, CallCancel, CallFail)

LAWS: list[Callable[[Sequence[CallEvent]], None]] = [check_journals_two, check_settles_once, check_settle_carries_all]


@given(streams)
def test_stream_journals_two(stream: list[CallEvent]) -> None:
    check_journals_two(stream)


@given(streams)
def test_stream_settles_once(stream: list[CallEvent]) -> None:
    check_settles_once(stream)


@given(streams)
def test_stream_settle_carries_all(stream: list[CallEvent]) -> None:
    check_settle_carries_all(stream)


def test_stream_journals_two_exhaustively_over_short_streams() -> None:
    for stream in short_streams(5):
        check_journals_two(stream)


def test_stream_settles_once_exhaustively_over_short_streams() -> None:
    for stream in short_streams(5):
        check_settles_once(stream)


def test_stream_settle_carries_all_exhaustively_over_short_streams() -> None:
    for stream in short_streams(5):
        check_settle_carries_all(stream)


@given(st.lists(st.tuples(st.sampled_from(["c1", "c2", "c3"]), events), max_size=30))
def test_stream_laws_hold_per_call_in_an_interleaved_stream(tagged: list[tuple[str, CallEvent]]) -> None:
    records = journal_many(tagged)
    for call in {c for c, _ in tagged}:
        own = [event for c, event in tagged if c == call]
        assert tuple(r for c, r in records if c == call) == journal(own)
        for law in LAWS:
            law(own)
