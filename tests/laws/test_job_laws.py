"""Laws of the job model (spec S2 "Jobs", the job law table): over free event sequences with Hypothesis (stateful and
plain), and exhaustively over every short sequence of a small domain.

Every event is free: any output size, exit, kill, quit or tick, in any order; any cap or the opt-out; any budget; any
job table history. (The stream_* laws over `journal` belong to the session half.)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from eukhe.core import job as core
from eukhe.core.job import (
    MAX_BYTES,
    Committed,
    Exit,
    Exited,
    JobEvent,
    JobState,
    Kill,
    Killed,
    Mark,
    Output,
    Quit,
    Started,
    Tick,
)
from tests.laws.fact_support import refused_field

# ---------------------------------------------------------------------------------------------------------------------
# Domains

caps = st.one_of(st.none(), st.integers(0, 64), st.integers(0, MAX_BYTES))
ending_events = st.one_of(st.builds(Exit, st.integers(-3, 300)), st.just(Kill()), st.just(Quit()))
events = st.one_of(
    st.builds(Output, st.integers(0, 100)),
    st.builds(Output, st.integers(0, MAX_BYTES)),
    ending_events,
    st.just(Tick()),
)
event_lists = st.lists(events, max_size=30)

SMALL_CAPS: tuple[int | None, ...] = (None, 0, 1, 2, 3)
SMALL_EVENTS: tuple[JobEvent, ...] = (
    Output(0),
    Output(1),
    Output(2),
    Output(4),
    Exit(0),
    Exit(1),
    Kill(),
    Quit(),
    Tick(),
)


def small_sequences(max_len: int) -> Iterator[tuple[int | None, tuple[JobEvent, ...]]]:
    """Every (cap, event sequence) of the small domain up to `max_len` events."""
    for cap in SMALL_CAPS:
        for length in range(max_len + 1):
            for seq in itertools.product(SMALL_EVENTS, repeat=length):
                yield cap, seq


EXHAUSTIVE = list(small_sequences(4))  # 5 caps x (1 + 9 + 81 + 729 + 6561) sequences


def bytes_before_end(seq: Sequence[JobEvent]) -> int:
    """Every byte written before the first end."""
    total = 0
    for event in seq:
        if isinstance(event, Exit | Kill | Quit):
            break
        if isinstance(event, Output):
            total += event.size
    return total


def first_end(seq: Sequence[JobEvent]) -> tuple[int, core.End] | None:
    """The index and end of the first ending event, if any."""
    for index, event in enumerate(seq):
        if isinstance(event, Exit):
            return index, Exited(event.code)
        if isinstance(event, Kill | Quit):
            return index, Killed()
    return None


# ---------------------------------------------------------------------------------------------------------------------
# One law per function, checked over a (cap, sequence)


def check_output_bounded(cap: int | None, seq: Sequence[JobEvent]) -> None:
    state = JobState(cap)
    for event in seq:
        state = core.feed(state, event)
        assert cap is None or state.kept <= cap
        unbounded = core.step(state, event)
        assert cap is None or unbounded.kept <= cap


def check_no_silent_loss(cap: int | None, seq: Sequence[JobEvent]) -> None:
    state, _ = core.run(JobState(cap), seq)
    assert state.kept + state.dropped == min(bytes_before_end(seq), MAX_BYTES)


def check_optout_keeps_all(seq: Sequence[JobEvent]) -> None:
    state, _ = core.run(JobState(None), seq)
    assert state.dropped == 0
    assert state.kept == min(bytes_before_end(seq), MAX_BYTES)


def check_cap_drops_only_excess(cap: int, seq: Sequence[JobEvent]) -> None:
    state, _ = core.run(JobState(cap), seq)
    written = min(bytes_before_end(seq), MAX_BYTES)
    assert state.dropped == max(0, written - cap)
    if written <= cap:
        assert state.dropped == 0
        assert state.kept == written


def check_ends_once(cap: int | None, seq: Sequence[JobEvent]) -> None:
    state = JobState(cap)
    reported: list[tuple[int, core.End]] = []
    for index, event in enumerate(seq):
        end = core.ends(state, event)
        if end is not None:
            reported.append((index, end))
        state = core.feed(state, event)
    first = first_end(seq)
    assert reported == ([] if first is None else [first])
    assert state.end == (None if first is None else first[1])


def check_end_is_final(state: JobState, event: JobEvent) -> None:
    if state.end is None:
        return
    assert core.feed(state, event) == state
    assert core.step(state, event) == state
    assert core.ends(state, event) is None


def check_kill_ends_now(state: JobState, event: JobEvent) -> None:
    if state.end is not None or not isinstance(event, Kill | Quit):
        return
    after = core.feed(state, event)
    assert after.end == Killed()
    assert core.ends(state, event) == Killed()
    assert (after.kept, after.dropped, after.cap) == (state.kept, state.dropped, state.cap)


def reachable_states(cap: int | None, seq: Sequence[JobEvent]) -> Iterator[JobState]:
    state = JobState(cap)
    yield state
    for event in seq:
        state = core.feed(state, event)
        yield state


JOB_LAWS = [
    "job_output_bounded",
    "job_no_silent_loss",
    "job_optout_keeps_all",
    "job_cap_drops_only_excess",
    "job_ends_once",
    "job_end_is_final",
    "job_kill_ends_now",
]


@pytest.mark.parametrize("law", JOB_LAWS, ids=[f"{law}_exhaustively" for law in JOB_LAWS])
def test_exhaustively_over_short_sequences(law: str) -> None:
    """Each job law over every (cap, sequence) of the small domain, up to 4 events."""
    for cap, seq in EXHAUSTIVE:
        if law == "job_output_bounded":
            check_output_bounded(cap, seq)
        elif law == "job_no_silent_loss":
            check_no_silent_loss(cap, seq)
        elif law == "job_optout_keeps_all" and cap is None:
            check_optout_keeps_all(seq)
        elif law == "job_cap_drops_only_excess" and cap is not None:
            check_cap_drops_only_excess(cap, seq)
        elif law == "job_ends_once":
            check_ends_once(cap, seq)
        elif law in ("job_end_is_final", "job_kill_ends_now") and len(seq) <= 3:
            check = check_end_is_final if law == "job_end_is_final" else check_kill_ends_now
            for state in reachable_states(cap, seq):
                for event in SMALL_EVENTS:
                    check(state, event)


@given(caps, event_lists)
def test_job_output_bounded(cap: int | None, seq: list[JobEvent]) -> None:
    check_output_bounded(cap, seq)


@given(caps, event_lists)
def test_job_no_silent_loss(cap: int | None, seq: list[JobEvent]) -> None:
    check_no_silent_loss(cap, seq)


@given(event_lists)
def test_job_optout_keeps_all(seq: list[JobEvent]) -> None:
    check_optout_keeps_all(seq)


@given(st.integers(0, MAX_BYTES) | st.integers(0, 200), event_lists)
def test_job_cap_drops_only_excess(cap: int, seq: list[JobEvent]) -> None:
    check_cap_drops_only_excess(cap, seq)


@given(caps, event_lists)
def test_job_ends_once(cap: int | None, seq: list[JobEvent]) -> None:
    check_ends_once(cap, seq)


@given(caps, event_lists, events)
def test_job_end_is_final(cap: int | None, seq: list[JobEvent], event: JobEvent) -> None:
    for state in reachable_states(cap, seq):
        check_end_is_final(state, event)


@given(caps, event_lists, ending_events)
def test_job_kill_ends_now(cap: int | None, seq: list[JobEvent], event: JobEvent) -> None:
    for state in reachable_states(cap, seq):
        check_kill_ends_now(state, Kill())
        check_kill_ends_now(state, event)


class JobMachine(RuleBasedStateMachine):
    """job_* laws, stateful: any interleaving of outputs, exits, kills, quits and ticks on one job."""

    @initialize(cap=caps, written=st.integers(0, 100))
    def begin(self, cap: int | None, written: int) -> None:
        self.cap = cap
        self.state = core.start(cap, written)
        self.written = written  # every byte written before the end
        self.ends: list[core.End] = []
        self.expected_end: core.End | None = None

    def apply(self, event: JobEvent) -> None:
        before = self.state
        end = core.ends(before, event)
        if end is not None:
            self.ends.append(end)
        self.state = core.feed(before, event)
        if before.end is None:
            if isinstance(event, Output):
                self.written += event.size
            elif isinstance(event, Exit) and self.expected_end is None:
                self.expected_end = Exited(event.code)
            elif isinstance(event, Kill | Quit) and self.expected_end is None:
                self.expected_end = Killed()
                # job_kill_ends_now: at once, output kept
                assert (self.state.kept, self.state.dropped) == (before.kept, before.dropped)
        else:
            assert self.state == before  # job_end_is_final

    @rule(size=st.integers(0, 1000) | st.integers(0, MAX_BYTES))
    def output(self, size: int) -> None:
        self.apply(Output(size))

    @rule(code=st.integers(-5, 255))
    def exit(self, code: int) -> None:
        self.apply(Exit(code))

    @rule()
    def kill(self) -> None:
        self.apply(Kill())

    @rule()
    def quit(self) -> None:
        self.apply(Quit())

    @rule()
    def tick(self) -> None:
        self.apply(Tick())

    @invariant()
    def laws_hold(self) -> None:
        state = self.state
        assert self.cap is None or state.kept <= self.cap  # job_output_bounded
        assert state.kept + state.dropped == min(self.written, MAX_BYTES)  # job_no_silent_loss
        if self.cap is None:
            assert state.dropped == 0  # job_optout_keeps_all
        elif self.written <= self.cap:
            assert state.dropped == 0  # job_cap_drops_only_excess
        assert len(self.ends) <= 1  # job_ends_once
        assert state.end == self.expected_end
        assert self.ends == ([] if self.expected_end is None else [self.expected_end])


TestJobMachine = JobMachine.TestCase


# ---------------------------------------------------------------------------------------------------------------------
# The blocking call: call_blocks_at_most_budget, call_settles_with_job


@dataclass(frozen=True, slots=True)
class CallOutcome:
    verdict: core.EndedInTime | core.DeadlinePassed
    returned_at: int
    end_at: int | None  # when the job ended (the instant its end was ready), if it did before the return


def blocking_call(state: JobState, timeline: Sequence[JobEvent], now: int, deadline: int) -> CallOutcome:
    """A blocking call over a timeline: each Tick moves time 1 ms; the call asks `wait` after every change.

    Past the end of the timeline, nothing happens but time (up to the deadline).
    """
    end_at = now if state.end is not None else None
    for event in timeline:
        verdict = core.wait(state, now, deadline)
        if not isinstance(verdict, core.Waiting):
            return CallOutcome(verdict, now, end_at)
        if isinstance(event, Tick):
            now += 1
        state = core.feed(state, event)
        if end_at is None and state.end is not None:
            end_at = now
    verdict = core.wait(state, now, deadline)
    if isinstance(verdict, core.Waiting):
        now = deadline
        verdict = core.wait(state, now, deadline)
    assert not isinstance(verdict, core.Waiting)
    return CallOutcome(verdict, now, end_at)


def check_call_blocks_at_most_budget(state: JobState, timeline: Sequence[JobEvent], now: int, budget: int) -> None:
    deadline = now + budget
    outcome = blocking_call(state, timeline, now, deadline)
    assert outcome.returned_at <= max(now, deadline)
    if budget <= 0:  # a passed deadline detaches at once, even when the end is ready
        assert outcome.verdict == core.DeadlinePassed(now)
        assert outcome.returned_at == now
    if isinstance(outcome.verdict, core.DeadlinePassed):
        assert outcome.verdict.at_ms == outcome.returned_at
        assert outcome.returned_at >= deadline


def check_call_settles_with_job(state: JobState, timeline: Sequence[JobEvent], now: int, budget: int) -> None:
    deadline = now + budget
    outcome = blocking_call(state, timeline, now, deadline)
    _, ends = core.run(state, timeline)
    own_end = state.end if state.end is not None else (ends[0] if ends else None)
    if isinstance(outcome.verdict, core.EndedInTime):
        assert outcome.verdict.end == own_end  # the job's own end, no other
        assert outcome.end_at is not None
        assert outcome.end_at < deadline
        assert outcome.returned_at == outcome.end_at  # returns as soon as the end is ready
    elif outcome.end_at is not None:
        assert outcome.end_at >= deadline or budget <= 0  # detached: the end was not ready in time


timelines = st.lists(st.one_of(st.just(Tick()), st.just(Tick()), events), max_size=40)
budgets = st.integers(-5, 30)
job_states = st.builds(
    lambda cap, seq: core.run(JobState(cap), seq)[0], caps, st.lists(st.one_of(events, st.just(Tick())), max_size=4)
)


@given(job_states, timelines, st.integers(0, 1000), budgets)
def test_call_blocks_at_most_budget(state: JobState, timeline: list[JobEvent], now: int, budget: int) -> None:
    check_call_blocks_at_most_budget(state, timeline, now, budget)


@given(job_states, timelines, st.integers(0, 1000), budgets)
def test_call_settles_with_job(state: JobState, timeline: list[JobEvent], now: int, budget: int) -> None:
    check_call_settles_with_job(state, timeline, now, budget)


def test_call_blocks_at_most_budget_and_call_settles_with_job_exhaustively() -> None:
    """call_blocks_at_most_budget, call_settles_with_job: every short timeline of ticks, outputs and ends."""
    moments: tuple[JobEvent, ...] = (Tick(), Output(1), Exit(0), Exit(2), Kill())
    starts = (JobState(2), JobState(2, end=Exited(7)), JobState(None, end=Killed()))
    for state, length, budget in itertools.product(starts, range(6), range(-1, 5)):
        for timeline in itertools.product(moments, repeat=length):
            check_call_blocks_at_most_budget(state, timeline, 10, budget)
            check_call_settles_with_job(state, timeline, 10, budget)


def test_wait_examples() -> None:
    """The three verdicts at their edges."""
    ended = JobState(None, end=Exited(0))
    assert core.wait(ended, 5, 5) == core.DeadlinePassed(5)  # a passed deadline detaches even when the end is ready
    assert core.wait(ended, 4, 5) == core.EndedInTime(Exited(0))
    assert core.wait(JobState(None), 4, 5) is core.WAITING
    assert core.deadline_for(100, None, 30) == 130
    assert core.deadline_for(100, 10, 30) == 110
    assert core.deadline_for(100, 99, 30) == 130
    assert core.deadline_for(100, -4, 30) == 100


# ---------------------------------------------------------------------------------------------------------------------
# Rewind: rewind_stops_orphans, rewind_keeps_target_jobs


@dataclass(frozen=True, slots=True)
class Commit:
    pass


@dataclass(frozen=True, slots=True)
class Begin:
    pass


@dataclass(frozen=True, slots=True)
class Finish:
    job: int  # index into the jobs started so far (mod their count)


@dataclass(frozen=True, slots=True)
class Back:
    target: int | None  # index into the entries committed so far (mod count + 1; that one: an entry before the open)


TableEvent = Commit | Begin | Finish | Back


class TableModel:
    """A job table's history as the rewind sees it: the order of commits and starts, and the running set."""

    def __init__(self) -> None:
        self.order: list[Mark] = []
        self.running: set[str] = set()
        self.entries: list[str] = []
        self.jobs: list[str] = []

    def apply(self, event: TableEvent) -> None:
        if isinstance(event, Commit):
            entry = f"e{len(self.entries)}"
            self.entries.append(entry)
            self.order.append(Committed(entry))
        elif isinstance(event, Begin):
            job = f"j{len(self.jobs)}"
            self.jobs.append(job)
            self.running.add(job)
            self.order.append(Started(job))
        elif isinstance(event, Finish) and self.jobs:
            self.running.discard(self.jobs[event.job % len(self.jobs)])
        elif isinstance(event, Back):
            target = self.target_of(event)
            before = set(self.running)
            verdict = core.rewind(self.order, self.running, target)
            self.running -= set(verdict.stop)
            check_rewind(self, target, before, verdict)

    def target_of(self, event: Back) -> str | None:
        if event.target is None:
            return None
        index = event.target % (len(self.entries) + 1)
        return self.entries[index] if index < len(self.entries) else "from-before-the-open"


def started_before(order: Sequence[Mark], job: str, target: str | None) -> bool:
    """Whether `job` started before the target's commit (target None, or an entry the order lacks: never)."""
    marks = list(order)
    if target is None or Committed(target) not in marks:
        return False
    return marks.index(Started(job)) < marks.index(Committed(target))


def check_rewind(model: TableModel, target: str | None, before: set[str], verdict: core.RewindVerdict) -> None:
    # rewind_stops_orphans: after the rewind every running job belongs to the target tree (started before its commit)
    for job in model.running:
        assert started_before(model.order, job, target), (job, target)
    # rewind_keeps_target_jobs: the target tree's jobs are untouched (kept, still running); only running jobs stop
    target_jobs = {job for job in before if started_before(model.order, job, target)}
    assert set(verdict.keep) == target_jobs
    assert target_jobs <= model.running
    assert set(verdict.stop) == before - target_jobs
    assert set(verdict.stop) <= before
    assert not set(verdict.stop) & set(verdict.keep)


table_events = st.lists(
    st.one_of(
        st.just(Commit()),
        st.just(Begin()),
        st.builds(Finish, st.integers(0, 20)),
        st.builds(Back, st.none() | st.integers(0, 20)),
    ),
    max_size=40,
)


@given(table_events)
def test_rewind_stops_orphans(history: list[TableEvent]) -> None:
    model = TableModel()
    for event in history:
        model.apply(event)
    model.apply(Back(None))
    assert not model.running  # "none": before every entry, so every job stops


@given(table_events, st.integers(0, 20))
def test_rewind_keeps_target_jobs(history: list[TableEvent], target: int) -> None:
    model = TableModel()
    for event in history:
        model.apply(event)
    running = set(model.running)
    model.apply(Back(target))
    if model.entries and target % (len(model.entries) + 1) == len(model.entries) - 1:
        # back to the last entry: every job started before it is kept
        assert model.running == {job for job in running if started_before(model.order, job, model.entries[-1])}


def test_rewind_stops_orphans_and_rewind_keeps_target_jobs_exhaustively() -> None:
    """rewind_stops_orphans, rewind_keeps_target_jobs: every history of up to 5 table events, then every rewind."""
    alphabet: tuple[TableEvent, ...] = (Commit(), Begin(), Finish(0), Finish(1), Back(None), Back(0), Back(1))
    for length in range(6):
        for history in itertools.product(alphabet, repeat=length):
            model = TableModel()
            for event in history:
                model.apply(event)  # each Back inside checks both laws
            for target in (None, *range(len(model.entries) + 1)):
                after = TableModel()
                after.order, after.running = list(model.order), set(model.running)
                after.entries, after.jobs = list(model.entries), list(model.jobs)
                after.apply(Back(target))


def test_rewind_examples() -> None:
    """The spec's cases: the target keeps jobs started before it; an entry from before the open comes before all."""
    order = [Committed("a"), Started("j1"), Committed("b"), Started("j2"), Started("j3")]
    assert core.rewind(order, {"j1", "j2", "j3"}, "b") == core.RewindVerdict(stop=("j2", "j3"), keep=("j1",))
    assert core.rewind(order, {"j1", "j3"}, "a") == core.RewindVerdict(stop=("j1", "j3"), keep=())
    assert core.rewind(order, {"j1", "j2"}, None) == core.RewindVerdict(stop=("j1", "j2"), keep=())
    assert core.rewind(order, {"j1", "j2"}, "old") == core.RewindVerdict(stop=("j1", "j2"), keep=())


class TableMachine(RuleBasedStateMachine):
    """rewind laws, stateful: commits, starts, ends and rewinds in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.model = TableModel()

    @rule()
    def commit(self) -> None:
        self.model.apply(Commit())

    @rule()
    def begin(self) -> None:
        self.model.apply(Begin())

    @rule(job=st.integers(0, 30))
    def finish(self, job: int) -> None:
        self.model.apply(Finish(job))

    @rule(entry=st.none() | st.integers(0, 30))
    def back(self, entry: int | None) -> None:
        self.model.apply(Back(entry))  # check_rewind runs inside: rewind_stops_orphans, rewind_keeps_target_jobs


TestTableMachine = TableMachine.TestCase


# ---------------------------------------------------------------------------------------------------------------------
# feed against the bound: job_feed_fits job_feed_no_output job_feed_ended job_feed_is_a_step job_feed_bounded
# job_feed_fills


@st.composite
def bounded_states(draw: st.DrawFn) -> JobState:
    """Any state the wire can carry, many of them near MAX_BYTES."""
    cap = draw(caps)
    near = draw(st.booleans())
    written = draw(st.integers(MAX_BYTES - 100, MAX_BYTES) if near else st.integers(0, MAX_BYTES))
    kept_max = written if cap is None else min(cap, written)
    kept = kept_max if cap is None else draw(st.integers(0, kept_max))
    end = draw(st.one_of(st.none(), st.builds(Exited, st.integers(-3, 300)), st.just(Killed())))
    return JobState(cap, kept, written - kept, end)


outputs = st.builds(Output, st.integers(0, 200) | st.integers(0, MAX_BYTES) | st.integers(MAX_BYTES, 2 * MAX_BYTES))


def check_feed_fits(state: JobState, event: Output) -> None:
    if state.written + event.size <= MAX_BYTES:
        assert core.feed(state, event) == core.step(state, event)


def check_feed_no_output(state: JobState, event: JobEvent) -> None:
    if not isinstance(event, Output):
        assert core.feed(state, event) == core.step(state, event)


def check_feed_ended(state: JobState, event: JobEvent) -> None:
    if state.end is not None:
        assert core.feed(state, event) == core.step(state, event) == state


def check_feed_is_a_step(state: JobState, event: Output) -> None:
    part = core.accepted(state, event)
    assert 0 <= part <= event.size
    assert core.feed(state, event) == core.step(state, Output(part))


def check_feed_bounded(state: JobState, event: JobEvent) -> None:
    after = core.feed(state, event)
    assert after.written <= MAX_BYTES
    assert after.cap is None or after.kept <= after.cap


def check_feed_fills(state: JobState, event: Output) -> None:
    if state.end is not None:
        return
    after = core.feed(state, event)
    assert (after.written == MAX_BYTES) == (state.written + event.size >= MAX_BYTES)


@given(bounded_states(), outputs)
def test_job_feed_fits(state: JobState, event: Output) -> None:
    check_feed_fits(state, event)


@given(bounded_states(), events)
def test_job_feed_no_output(state: JobState, event: JobEvent) -> None:
    check_feed_no_output(state, event)


@given(bounded_states(), events)
def test_job_feed_ended(state: JobState, event: JobEvent) -> None:
    check_feed_ended(state, event)


@given(bounded_states(), outputs)
def test_job_feed_is_a_step(state: JobState, event: Output) -> None:
    check_feed_is_a_step(state, event)


@given(bounded_states(), events | outputs)
def test_job_feed_bounded(state: JobState, event: JobEvent) -> None:
    check_feed_bounded(state, event)


@given(bounded_states(), outputs)
def test_job_feed_fills(state: JobState, event: Output) -> None:
    check_feed_fills(state, event)


def small_bounded_states() -> Iterator[JobState]:
    """Every state near the bound with a cap from a small set and an end from a small set."""
    for cap in (None, 0, 1, 2, MAX_BYTES):
        for written in (0, 1, 2, MAX_BYTES - 2, MAX_BYTES - 1, MAX_BYTES):
            for kept in range(3):
                kept_here = written if cap is None else min(kept, cap, written)
                for end in (None, Exited(0), Killed()):
                    yield JobState(cap, kept_here, written - kept_here, end)
            yield (
                JobState(cap, written if cap is None else min(cap, written), 0, None)
                if (cap is None or written <= cap)
                else JobState(cap, cap, written - cap, None)
            )


FEED_LAWS = {
    "job_feed_fits": check_feed_fits,
    "job_feed_no_output": check_feed_no_output,
    "job_feed_ended": check_feed_ended,
    "job_feed_is_a_step": check_feed_is_a_step,
    "job_feed_bounded": check_feed_bounded,
    "job_feed_fills": check_feed_fills,
}
OUTPUT_ONLY = {"job_feed_fits", "job_feed_is_a_step", "job_feed_fills"}


@pytest.mark.parametrize("law", list(FEED_LAWS), ids=[f"{law}_exhaustively" for law in FEED_LAWS])
def test_exhaustively_near_the_bound(law: str) -> None:
    """Each job_feed law over every small state near MAX_BYTES and every output size around the room left."""
    check: Callable[[JobState, Any], None] = FEED_LAWS[law]
    sizes = (0, 1, 2, 3, MAX_BYTES - 1, MAX_BYTES, MAX_BYTES + 1)
    others = () if law in OUTPUT_ONLY else SMALL_EVENTS
    for state in small_bounded_states():
        for event in (*(Output(size) for size in sizes), *others):
            check(state, event)


# ---------------------------------------------------------------------------------------------------------------------
# The entry: job_entry. The shell builds `JobState`, `Output` and `Exit` records and asks `accepted`, `ends` and
# `feed` (eukhe.jobs.job); a well-formed record gets the model's answer, any other one exactly one `JobFactError`.


def model_answer(state: JobState, event: JobEvent) -> tuple[JobState, core.End | None]:
    """The job model written out on its own: the state after the event and the end it reports."""
    if state.end is not None:
        return state, None
    if isinstance(event, Output):
        taken = min(event.size, MAX_BYTES - state.kept - state.dropped)
        kept = taken if state.cap is None else min(taken, state.cap - state.kept)
        return JobState(state.cap, state.kept + kept, state.dropped + taken - kept), None
    if isinstance(event, Exit):
        return JobState(state.cap, state.kept, state.dropped, Exited(event.code)), Exited(event.code)
    if isinstance(event, Kill | Quit):
        return JobState(state.cap, state.kept, state.dropped, Killed()), Killed()
    return state, None


def check_entry_answers(state: JobState, event: JobEvent) -> None:
    assert JobState(state.cap, state.kept, state.dropped, state.end) == state  # its parts build it, unrefused
    after, end = model_answer(state, event)
    assert core.feed(state, event) == after
    assert core.ends(state, event) == end
    if isinstance(event, Output):
        assert core.accepted(state, event) == after.written - state.written


@given(bounded_states(), events | st.builds(Output, st.integers(MAX_BYTES - 300, MAX_BYTES)))
def test_job_entry_answers_the_model(state: JobState, event: JobEvent) -> None:
    check_entry_answers(state, event)


def test_job_entry_answers_exhaustively() -> None:
    """The shell's calls over every small state near the bound and every small event."""
    for state in small_bounded_states():
        for event in (*SMALL_EVENTS, Output(MAX_BYTES), Output(MAX_BYTES + 1)):
            check_entry_answers(state, event)


def refusal_of(make: Callable[[], object]) -> str | None:
    """The field a `JobFactError` names when `make` runs, or None when nothing refuses."""
    return refused_field(core.JobFactError, make)


RUNNING = JobState(4, 1)
MALFORMED: list[tuple[Callable[[], object], str]] = [
    (lambda: JobState(-1), "cap"),
    (lambda: JobState(True), "cap"),
    (lambda: JobState(1.5), "cap"),  # type: ignore[arg-type]
    (lambda: JobState("4"), "cap"),  # type: ignore[arg-type]
    (lambda: JobState(4, kept=5), "kept"),
    (lambda: JobState(4, kept=-1), "kept"),
    (lambda: JobState(4, kept="1"), "kept"),  # type: ignore[arg-type]
    (lambda: JobState(None, dropped=-2), "dropped"),
    (lambda: JobState(None, dropped=False), "dropped"),
    (lambda: JobState(None, end="exited"), "end"),  # type: ignore[arg-type]
    (lambda: JobState(None, end=Kill()), "end"),  # type: ignore[arg-type]
    (lambda: JobState(-1, kept=-1), "cap"),  # the first wrong part
    (lambda: Exited("0"), "end.code"),  # type: ignore[arg-type]
    (lambda: Exited(None), "end.code"),  # type: ignore[arg-type]
    (lambda: Output(-1), "event.size"),
    (lambda: Output(False), "event.size"),
    (lambda: Output(1.0), "event.size"),  # type: ignore[arg-type]
    (lambda: Exit(None), "event.code"),  # type: ignore[arg-type]
    (lambda: Exit(True), "event.code"),
    (lambda: core.feed(RUNNING, "kill"), "event"),  # type: ignore[arg-type]
    (lambda: core.feed(RUNNING, None), "event"),  # type: ignore[arg-type]
    (lambda: core.feed(RUNNING, Exited(0)), "event"),  # type: ignore[arg-type]
    (lambda: core.feed(JobState(4, end=Killed()), "tick"), "event"),  # type: ignore[arg-type]
    (lambda: core.ends(RUNNING, Committed("x")), "event"),  # type: ignore[arg-type]
    (lambda: core.ends(JobState(None, end=Killed()), Started("x")), "event"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("make", "field"), MALFORMED)
def test_job_entry_refuses_malformed_exactly(make: Callable[[], object], field: str) -> None:
    assert refusal_of(make) == field


junk = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4), st.lists)


@given(bounded_states(), junk)
def test_job_entry_refuses_any_non_request(state: JobState, value: object) -> None:
    """Whatever is not a job event, fed to any state (running or ended), is refused as the event."""
    assert refusal_of(lambda: core.feed(state, value)) == "event"  # type: ignore[arg-type]
    assert refusal_of(lambda: core.ends(state, value)) == "event"  # type: ignore[arg-type]


bad_counts = st.integers(max_value=-1) | st.booleans() | st.floats() | st.text(max_size=3)


@given(bounded_states(), st.sampled_from(["cap", "kept", "dropped"]), bad_counts | st.none())
def test_job_entry_refuses_one_bad_field(state: JobState, field: str, bad: object) -> None:
    if field == "cap" and bad is None:
        return  # None is a valid cap (the opt-out)
    parts: dict[str, Any] = {"cap": state.cap, "kept": state.kept, "dropped": state.dropped, "end": state.end}
    parts[field] = bad
    assert refusal_of(lambda: JobState(**parts)) == field


@given(bad_counts)
def test_job_entry_refuses_a_bad_output_size(bad: object) -> None:
    assert refusal_of(lambda: Output(bad)) == "event.size"  # type: ignore[arg-type]


def test_job_entry_example() -> None:
    """An anchor on what the shell does for a capped job: 5 bytes past a cap of 3 with 2 kept, then an exit."""
    state = JobState(cap=3, kept=2)
    assert core.accepted(state, Output(5)) == 5
    assert core.feed(state, Output(5)) == JobState(cap=3, kept=3, dropped=4)
    assert core.ends(JobState(None, 9), Exit(2)) == Exited(2)
    assert core.feed(JobState(None, 9), Exit(2)) == JobState(None, 9, 0, Exited(2))


@given(st.integers(min_value=-64, max_value=255))
def test_a_return_code_exits_as_a_shell_says(returncode: int) -> None:
    """0..255 exits as itself; -N (ended by signal N nobody asked for) exits 128 + N, as bash reports it."""
    assert core.exited(returncode) == Exited(returncode if returncode >= 0 else 128 + -returncode)
    assert core.exited(-9) == Exited(137)


@given(st.one_of(st.none(), st.integers(-100, 100)), st.integers(0, 100))
def test_a_blocking_span_stays_within_the_budget(timeout_ms: int | None, budget_ms: int) -> None:
    """The span is the timeout asked (none: the whole budget), never below 0 nor past the budget."""
    span = core.blocking_span(timeout_ms, budget_ms)
    assert 0 <= span <= budget_ms
    assert span == (budget_ms if timeout_ms is None else min(max(0, timeout_ms), budget_ms))
    assert core.deadline_for(1000, timeout_ms, budget_ms) == 1000 + span


# ---- edges the mutation run found unpinned (docs/testing.md) ------------------------------------------------------


def test_job_cap_of_refuses_what_is_not_a_truncation_naming_it() -> None:
    with pytest.raises(TypeError, match="not a Truncation: 'off'"):
        core.cap_of("off")  # type: ignore[arg-type]


def test_job_start_counts_only_what_the_run_wrote_before() -> None:
    assert core.start(5) == core.JobState(cap=5)
    assert core.start(5, 7) == core.JobState(cap=5, kept=5, dropped=2)


def test_stream_journals_two_and_the_state_says_the_phase_and_keeps_a_failures_warning() -> None:
    state, made = core.journal_step(core.CallState(), core.CallBegun())
    assert (state.phase, len(made)) == (core.CallPhase.RUNNING, 1)
    state, _ = core.journal_step(state, core.CallWarning("w"))
    state, (settle,) = core.journal_step(state, core.CallFail("boom"))
    assert state.phase is core.CallPhase.SETTLED
    assert state.warnings == ("w", "boom") == settle.warnings


def test_rewind_stops_orphans_once_even_when_a_start_is_seen_twice() -> None:
    order = [core.Committed("e1"), core.Started("j"), core.Started("j")]
    assert core.rewind(order, {"j"}, "e1") == core.RewindVerdict(stop=("j",), keep=())
