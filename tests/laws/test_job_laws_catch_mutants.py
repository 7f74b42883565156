"""The job laws can fail: one broken model per law family, swapped in for the real function, must break its law.

A law that passes on a broken model is worthless; each case here breaks one rule of `eukhe.core.job` the way a
plausible bug would and runs the family's checks over their exhaustive domain.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

import pytest

from eukhe.core import job as core
from tests.laws import test_job_laws as laws

real_step = core.step
real_wait = core.wait
real_rewind = core.rewind


def step_ignoring_the_cap(state: core.JobState, event: core.JobEvent) -> core.JobState:
    if state.end is None and isinstance(event, core.Output):
        return replace(state, kept=state.kept + event.size)
    return real_step(state, event)


def step_ignoring_the_end(state: core.JobState, event: core.JobEvent) -> core.JobState:
    if state.end is not None and isinstance(event, core.Exit):
        return replace(state, end=core.Exited(event.code))
    return real_step(state, event)


def kill_dropping_the_output(state: core.JobState, event: core.JobEvent) -> core.JobState:
    after = real_step(state, event)
    if state.end is None and isinstance(event, core.Kill):
        return replace(after, kept=0)
    return after


def wait_settling_at_the_deadline(state: core.JobState, now_ms: int, deadline_ms: int) -> core.WaitVerdict:
    if now_ms == deadline_ms and state.end is not None:
        return core.EndedInTime(state.end)
    return real_wait(state, now_ms, deadline_ms)


def rewind_keeping_unseen_targets(
    order: Sequence[core.Mark], running: Collection[str], target: str | None
) -> core.RewindVerdict:
    if target is not None and core.Committed(target) not in order:  # "an unseen entry keeps every job": wrong
        return core.RewindVerdict(stop=(), keep=tuple(m.job for m in order if isinstance(m, core.Started)))
    return real_rewind(order, running, target)


def accepting_everything(state: core.JobState, event: core.JobEvent) -> int:
    return event.size if isinstance(event, core.Output) and state.end is None else 0


def run_job_family(*checks: Callable[[int | None, Sequence[core.JobEvent]], None]) -> None:
    for cap, seq in laws.EXHAUSTIVE:
        for check in checks:
            check(cap, seq)


def run_state_family(*checks: Callable[[core.JobState, core.JobEvent], None]) -> None:
    for cap, seq in laws.EXHAUSTIVE:
        if len(seq) <= 2:
            for state in laws.reachable_states(cap, seq):
                for event in laws.SMALL_EVENTS:
                    for check in checks:
                        check(state, event)


def run_call_family() -> None:
    moments = (core.Tick(), core.Exit(0))
    starts = (core.JobState(None), core.JobState(None, end=core.Exited(1)))
    for start, length, budget in itertools.product(starts, range(4), range(3)):
        for timeline in itertools.product(moments, repeat=length):
            laws.check_call_blocks_at_most_budget(start, timeline, 0, budget)
            laws.check_call_settles_with_job(start, timeline, 0, budget)


def run_rewind_family() -> None:
    model = laws.TableModel()
    for event in (laws.Begin(), laws.Commit(), laws.Begin()):
        model.apply(event)
    model.apply(laws.Back(1))  # an entry from before the open


def run_feed_family() -> None:
    for state in laws.small_bounded_states():
        for size in (0, 1, core.MAX_BYTES):
            laws.check_feed_bounded(state, core.Output(size))
            laws.check_feed_fills(state, core.Output(size))


def run_entry_family() -> None:
    assert laws.refusal_of(lambda: core.JobState(1, kept=2)) == "kept"
    assert laws.refusal_of(lambda: core.JobState(None, kept=-1)) == "kept"


def counting_anything(field: str, value: object) -> None:
    """A count check that lets a negative through."""
    if not isinstance(value, int):
        raise core.JobFactError(field, value)


MUTANTS = [
    ("job_output_bounded", "step", step_ignoring_the_cap, lambda: run_job_family(laws.check_output_bounded)),
    ("job_end_is_final", "step", step_ignoring_the_end, lambda: run_state_family(laws.check_end_is_final)),
    ("job_ends_once", "step", step_ignoring_the_end, lambda: run_job_family(laws.check_ends_once)),
    ("job_kill_ends_now", "step", kill_dropping_the_output, lambda: run_state_family(laws.check_kill_ends_now)),
    ("call_blocks_at_most_budget", "wait", wait_settling_at_the_deadline, run_call_family),
    ("rewind_stops_orphans", "rewind", rewind_keeping_unseen_targets, run_rewind_family),
    ("job_feed_bounded", "accepted", accepting_everything, run_feed_family),
    ("job_entry", "_check_count", counting_anything, run_entry_family),
]


@pytest.mark.parametrize(("law", "name", "mutant", "family"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_broken_model_breaks_the_law(
    law: str, name: str, mutant: object, family: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    family()  # the real model keeps the law
    monkeypatch.setattr(core, name, mutant)
    with pytest.raises((AssertionError, core.JobFactError)):  # the law fails, or the records refuse what it made
        family()
