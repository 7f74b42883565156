"""Laws of the kernel's life table (`eukhe.core.kernel_life`): every life x every event, exhaustively.

The domain is small (7 phases x 7 reasons x 20 events), so each law is checked over all of it and over every life
reachable from the start; a law about whole scripts runs over the reachable lives paired with what the script did so
far (every script of any length), and Hypothesis adds free scripts.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator
from typing import TypeVar

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.kernel_life import (
    CELL_STATUS,
    FRAMES,
    OUTPUT_FRAMES,
    START,
    TRANSITIONS,
    Deliver,
    Effect,
    End,
    Event,
    FailCalls,
    Life,
    Phase,
    Reason,
    SendShutdown,
    SettleReady,
    SettleSnapshot,
    Terminate,
    acts_on,
    live,
    reads,
    run,
    salvages,
    step,
    takes_calls,
    takes_cells,
)

S = TypeVar("S", bound=Hashable)
Asked = tuple[Life, int, tuple[SettleSnapshot, ...]]
EVERY_LIFE = [Life(phase, reason) for phase in Phase for reason in (None, *Reason)]
UNDECIDED = {Phase.STARTING, Phase.READY, Phase.STOPPING_SNAPSHOT}


def _every_script(start: S, advance: Callable[[S, Event], S]) -> Iterator[S]:
    """Every state reachable from `start` by `advance` on any event, once each: a law checked on each holds after
    every script of any length (a state is a life, with what the script did so far)."""
    seen = {start}
    todo = [start]
    while todo:
        state = todo.pop()
        yield state
        for event in Event:
            after = advance(state, event)
            if after not in seen:
                seen.add(after)
                todo.append(after)


def _reachable() -> list[Life]:
    lives = _every_script(START, lambda life, event: step(life, event)[0])
    return sorted(lives, key=lambda life: (life.phase.value, life.reason.value if life.reason else ""))


REACHABLE = _reachable()


def _scripts(length: int) -> Iterator[tuple[Event, ...]]:
    for n in range(length + 1):
        yield from itertools.product(Event, repeat=n)


def _trace(events: tuple[Event, ...]) -> list[tuple[Life, Event, Life, tuple[Effect, ...]]]:
    life = START
    trace = []
    for event in events:
        after, effects = step(life, event)
        trace.append((life, event, after, effects))
        life = after
    return trace


scripts = st.lists(st.sampled_from(list(Event)), max_size=40).map(tuple)


def test_kernel_life_table_is_total() -> None:
    assert set(TRANSITIONS) == {(phase, event) for phase in Phase for event in Event}
    for life in EVERY_LIFE:  # an impossible pair has an answer too, never a KeyError
        for event in Event:
            step(life, event)


def test_kernel_life_gone_absorbs_every_event() -> None:
    for life in EVERY_LIFE:
        if life.phase is Phase.GONE:
            for event in Event:
                assert step(life, event) == (life, ())


def _check_one_end(events: tuple[Event, ...]) -> None:
    life, effects = run(events)
    ends = [e for e in effects if isinstance(e, End)]
    assert len(ends) == (1 if life.phase is Phase.GONE else 0), (events, ends)
    if ends:
        assert ends[0].reason is life.reason


def test_kernel_life_exactly_one_end_per_life() -> None:
    for events in _scripts(2):
        _check_one_end(events)

    def advance(state: tuple[Life, int], event: Event) -> tuple[Life, int]:  # a life, the ends so far
        after, effects = step(state[0], event)
        return after, min(2, state[1] + sum(isinstance(e, End) for e in effects))

    for life, ends in _every_script((START, 0), advance):
        assert ends == (1 if life.phase is Phase.GONE else 0), life


@given(scripts)
def test_kernel_life_exactly_one_end_per_life_hypothesis(events: tuple[Event, ...]) -> None:
    _check_one_end(events)


def test_kernel_life_ends_only_into_gone() -> None:
    for life in REACHABLE:
        for event in Event:
            after, effects = step(life, event)
            if any(isinstance(e, End) for e in effects):
                assert after.phase is Phase.GONE and life.phase is not Phase.GONE
                assert event in (Event.EXITED, Event.HOST_FAILED)
            if after.phase is Phase.GONE and life.phase is not Phase.GONE:
                assert after.reason is not None and End(after.reason) in effects


def test_kernel_life_reason_is_decided_once() -> None:
    for life in REACHABLE:
        assert (life.reason is None) == (life.phase in UNDECIDED), life
        for event in Event:
            after, _ = step(life, event)
            if life.reason is not None:
                assert after.reason is life.reason, (life, event)


def test_kernel_life_snapshot_stop_that_meets_a_death_ends_with_the_death() -> None:
    stopping, effects = run([Event.READY, Event.SNAPSHOT_STOP])
    assert stopping.phase is Phase.STOPPING_SNAPSHOT and SendShutdown() in effects
    for tail in _scripts(3):
        for death in (Event.STDOUT_CLOSED, Event.EXITED):
            events = (*tail, death, Event.EXITED)
            trace = _trace((Event.READY, Event.SNAPSHOT_STOP, *events))
            snapshot_done = any(e is Event.SNAPSHOT_DONE and b.phase is Phase.STOPPING_SNAPSHOT for b, e, _, _ in trace)
            decided_before = any(
                a.phase is not Phase.STOPPING_SNAPSHOT for b, _, a, _ in trace[2:] if b.phase is Phase.STOPPING_SNAPSHOT
            )
            life = trace[-1][2]
            settled = [e for *_, effects in trace for e in effects if isinstance(e, SettleSnapshot)]
            assert life.phase is Phase.GONE
            if not snapshot_done and not decided_before:  # the death came first
                assert life.reason is Reason.DIED
                assert settled == [SettleSnapshot(written=False)]
            if life.reason is Reason.STOPPED:
                assert settled == [SettleSnapshot(written=True)]
            else:
                assert SettleSnapshot(written=True) not in settled


def _check_snapshot_settles_once(events: tuple[Event, ...]) -> None:
    trace = _trace(events)
    asked = sum(SendShutdown() in effects for *_, effects in trace)
    settled = [e for *_, effects in trace for e in effects if isinstance(e, SettleSnapshot)]
    assert asked <= 1
    life = trace[-1][2] if trace else START
    assert len(settled) == (asked if life.phase is not Phase.STOPPING_SNAPSHOT else 0)
    if settled:
        assert settled[0].written == (life.reason is Reason.STOPPED)


def test_kernel_life_a_snapshot_stop_settles_once() -> None:
    for events in _scripts(2):
        _check_snapshot_settles_once(events)

    def advance(state: Asked, event: Event) -> Asked:  # a life, the shutdowns asked and the settles so far
        life, asked, settled = state
        after, effects = step(life, event)
        more = tuple(e for e in effects if isinstance(e, SettleSnapshot))
        return after, min(2, asked + (SendShutdown() in effects)), (*settled, *more)[:2]

    for life, asked, settled in _every_script((START, 0, ()), advance):
        assert asked <= 1 and len(settled) == (asked if life.phase is not Phase.STOPPING_SNAPSHOT else 0), life
        if settled:
            assert settled[0].written == (life.reason is Reason.STOPPED)


@given(scripts)
def test_kernel_life_a_snapshot_stop_settles_once_hypothesis(events: tuple[Event, ...]) -> None:
    _check_snapshot_settles_once(events)


def test_kernel_life_salvage_only_while_retired() -> None:
    for life in EVERY_LIFE:
        for event in Event:
            if salvages(life, event):
                assert life.phase is Phase.RETIRED and event in OUTPUT_FRAMES
            if life.phase is Phase.RETIRED:
                assert acts_on(life, event) == (event in OUTPUT_FRAMES) == salvages(life, event)


def test_kernel_life_queries_agree_with_the_table() -> None:
    for life in EVERY_LIFE:
        for event in Event:
            _, effects = step(life, event)
            assert acts_on(life, event) == (Deliver() in effects)
            assert not acts_on(life, event) or event in FRAMES
            assert salvages(life, event) == (acts_on(life, event) and life.phase is Phase.RETIRED)
            if Deliver() in effects and life.phase is not Phase.RETIRED:
                assert live(life)
        assert takes_cells(life) == takes_calls(life) == (life.phase is Phase.READY)
        assert live(life) == (life.phase not in (Phase.RETIRED, Phase.GONE))
        assert reads(life) == any(acts_on(life, event) for event in Event)
    assert not any(acts_on(Life(Phase.GONE), event) for event in Event)


def test_kernel_life_ready_once_and_only_from_starting() -> None:
    for life in REACHABLE:
        for event in Event:
            after, effects = step(life, event)
            if after.phase is Phase.READY and life.phase is not Phase.READY:
                assert life.phase is Phase.STARTING and event is Event.READY and effects == (SettleReady(),)
            assert (SettleReady() in effects) == (life.phase is Phase.STARTING and event is Event.READY)


def test_kernel_life_calls_never_outlive_ready() -> None:
    for life in REACHABLE:
        for event in Event:
            after, effects = step(life, event)
            if life.phase in (Phase.STARTING, Phase.READY) and after.phase not in (Phase.STARTING, Phase.READY):
                assert FailCalls() in effects, (life, event)


def test_kernel_life_every_life_can_be_ended_by_a_kill() -> None:
    for life in REACHABLE:
        killed, _ = step(life, Event.KILL)
        gone, _ = step(killed, Event.EXITED)
        assert gone.phase is Phase.GONE
        if life.reason is None and life.phase is not Phase.GONE:
            assert gone.reason is Reason.KILLED


def test_kernel_life_start_timeout_fails_only_a_start() -> None:
    for life in REACHABLE:
        after, _ = step(life, Event.START_TIMEOUT)
        if life.phase is Phase.STARTING:
            assert after == Life(Phase.ENDING, Reason.START_FAILED)
        else:
            assert after == life


def test_kernel_life_every_reason_has_a_cell_status() -> None:
    assert set(CELL_STATUS) == set(Reason)
    assert {CELL_STATUS[r] for r in Reason} <= {"died", "killed", "fault"}


def test_kernel_life_a_decided_end_has_begun_its_termination() -> None:
    def advance(state: tuple[Life, bool], event: Event) -> tuple[Life, bool]:  # a life, whether it is terminating
        after, effects = step(state[0], event)
        return after, state[1] or Terminate() in effects

    for life, terminating in _every_script((START, False), advance):
        if life.reason is not None and life.phase is not Phase.GONE:  # EXITED will come: the shell is ending it
            assert terminating, life
