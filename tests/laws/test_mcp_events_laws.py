"""Laws of resuming an MCP stream (`eukhe.core.mcp_events`): which events a connection keeps, and what a client
resuming after one gets again.

A model keeps every event ever appended; the references below derive what the log must hold and replay from the
rules in the module's docstring, not from its code, and Hypothesis drives both with the same appends.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.mcp_events import Event, EventLog

STREAMS = ["1", "2", "_GET_stream"]
APPENDS = st.lists(st.tuples(st.sampled_from(STREAMS), st.none() | st.integers(0, 99), st.integers(0, 40)), max_size=30)
BOUNDS = st.tuples(st.integers(1, 6), st.integers(0, 100))


def reference_kept(history: list[Event[int]], max_events: int, max_bytes: int) -> list[Event[int]]:
    """The longest run of newest events within both bounds; at least the newest."""
    kept: list[Event[int]] = []
    for event in reversed(history):
        if kept and (len(kept) + 1 > max_events or sum(e.size for e in kept) + event.size > max_bytes):
            break
        kept.insert(0, event)
    return kept


def logged(
    appends: list[tuple[str, int | None, int]], bounds: tuple[int, int]
) -> tuple[EventLog[int], list[Event[int]]]:
    """The log after `appends`, and the model's whole history of them."""
    log: EventLog[int] = EventLog(*bounds)
    history: list[Event[int]] = []
    for stream, message, size in appends:
        number = log.append(stream, message, size)
        history.append(Event(number, stream, message, size))
    return log, history


@given(APPENDS, BOUNDS)
def test_append_numbers_the_events_from_one_without_a_gap(
    appends: list[tuple[str, int | None, int]], bounds: tuple[int, int]
) -> None:
    _, history = logged(appends, bounds)
    assert [event.number for event in history] == list(range(1, len(appends) + 1))


@given(APPENDS, BOUNDS)
def test_bounds_keep_the_newest_events_within_both_and_always_the_newest(
    appends: list[tuple[str, int | None, int]], bounds: tuple[int, int]
) -> None:
    log, history = logged(appends, bounds)
    assert list(log.events) == reference_kept(history, *bounds)
    if len(log.events) > 1:
        assert len(log.events) <= bounds[0] and sum(e.size for e in log.events) <= bounds[1]
    assert log.bytes == sum(event.size for event in log.events)


@given(APPENDS, BOUNDS)
def test_after_replays_the_later_messages_of_the_resumed_stream_or_nothing_for_an_event_not_kept(
    appends: list[tuple[str, int | None, int]], bounds: tuple[int, int]
) -> None:
    log, history = logged(appends, bounds)
    kept = reference_kept(history, *bounds)
    held = {event.number: event for event in kept}
    for number in range(-1, len(history) + 3):
        replay = log.after(number)
        if number not in held:
            assert replay is None, number
            continue
        stream = held[number].stream
        assert replay is not None and replay.stream == stream
        later = [e for e in kept if e.number > number and e.stream == stream and e.message is not None]
        assert list(replay.events) == later, number
