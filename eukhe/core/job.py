"""The pure job model (spec S2 "Jobs" 1-4 and 6; model `job`: `step`, `ends`, `wait`, `journal`, `rewind`).

Everything that decides about a job lives here, as data and total functions; the shell (`eukhe.jobs`) reads facts
(bytes written, an exit, the clock, the entry commits it saw), asks these functions and does what they answer.

Theory of operation:
- A job is a `JobState`: a byte cap (None = Truncation Off), bytes kept and dropped, and its end (None = running).
- `step` is the unbounded transition on one `JobEvent`; `feed` is `step` with kept + dropped held to `MAX_BYTES`, the
  wire's largest Nat (the shell's counters run on `feed`). `ends` names the end an event reports (at most one, ever).
- `wait` is the blocking-call decision at one instant: a passed deadline detaches (even when the end is ready); an
  ended job settles with its own end; else not yet (`WAITING`).
- `journal_step` / `journal` fold one tool call's event stream into its journal records: start and settle, no more.
- `rewind` picks, from the entry commits and job starts the job table saw in order, the running jobs a rewind stops.
- The records refuse what no job has (law `job_entry`): a negative or non-integer count, kept past the cap, an end
  or event of another kind raise `JobFactError` naming the part, so the shell's `feed` only ever sees real facts.

Invariants (the laws in tests/laws/test_job_laws.py): kept <= cap; kept + dropped == every byte fed (below the
bound); at most one end, and nothing changes after it.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from eukhe.core.bound import Off, On, Truncation
from eukhe.core.fact_errors import FactError, is_count, is_int

MAX_BYTES = 2**64 - 1
"""The wire's largest Nat: bytes kept + dropped saturate here."""


class JobFactError(FactError):
    """A job state or event no job has (law `job_entry`): `field` names the first part that is wrong."""

    what = "a job fact"


def _check_count(field: str, value: object) -> None:
    if not is_count(value):
        raise JobFactError(field, value)


def _check_code(field: str, value: object) -> None:
    if not is_int(value):
        raise JobFactError(field, value)


# ---------------------------------------------------------------------------------------------------------------------
# Ends and events


@dataclass(frozen=True, slots=True)
class Exited:
    """The run exited with `code` (a leader ended by a signal nobody asked for: 128 + the signal)."""

    code: int

    def __post_init__(self) -> None:
        _check_code("end.code", self.code)


@dataclass(frozen=True, slots=True)
class Killed:
    """The run ended by our kill: a cancel, a rewind, or the host quitting."""


End = Exited | Killed


def exited(returncode: int) -> Exited:
    """A leader's end from its return code as the OS reports it: -N (a signal N nobody asked for) exits 128 + N."""
    return Exited(returncode if returncode >= 0 else 128 - returncode)


@dataclass(frozen=True, slots=True)
class Output:
    """The run wrote `size` bytes."""

    size: int

    def __post_init__(self) -> None:
        _check_count("event.size", self.size)


@dataclass(frozen=True, slots=True)
class Exit:
    """The owner reports that the run exited with `code`."""

    code: int

    def __post_init__(self) -> None:
        _check_code("event.code", self.code)


@dataclass(frozen=True, slots=True)
class Kill:
    """The owner reports the end of a kill (the model ends at once; the real kill may take a while)."""


@dataclass(frozen=True, slots=True)
class Quit:
    """The host quits: it ends every running job, as killed."""


@dataclass(frozen=True, slots=True)
class Tick:
    """One millisecond passes; a job does not change (time matters only to `wait`)."""


JobEvent = Output | Exit | Kill | Quit | Tick


# ---------------------------------------------------------------------------------------------------------------------
# The job state and its step


@dataclass(frozen=True, slots=True)
class JobState:
    """A job: its byte cap (None = keep every byte), bytes kept and dropped, and its end (None while running)."""

    cap: int | None
    kept: int = 0
    dropped: int = 0
    end: End | None = None

    def __post_init__(self) -> None:
        if self.cap is not None:
            _check_count("cap", self.cap)
        _check_count("kept", self.kept)
        _check_count("dropped", self.dropped)
        if self.cap is not None and self.kept > self.cap:
            raise JobFactError("kept", self.kept)
        if self.end is not None and not isinstance(self.end, Exited | Killed):
            raise JobFactError("end", self.end)

    @property
    def running(self) -> bool:
        return self.end is None

    @property
    def written(self) -> int:
        """Every byte counted: kept + dropped."""
        return self.kept + self.dropped


def cap_of(truncation: Truncation) -> int | None:
    """The byte cap a Truncation gives a job: On -> its max_bytes; Off -> None (keep every byte)."""
    if isinstance(truncation, On):
        return truncation.limits.max_bytes
    if isinstance(truncation, Off):
        return None
    raise TypeError(f"not a Truncation: {truncation!r}")


def step(state: JobState, event: JobEvent) -> JobState:
    """The unbounded step: output is kept up to the cap and dropped past it; an exit, kill or quit ends a running job.

    Events after the end change nothing (jobs 2). Anything that is not a `JobEvent` raises `JobFactError`.
    """
    if state.end is not None:
        if isinstance(event, Output | Exit | Kill | Quit | Tick):
            return state
        raise JobFactError("event", event)
    if isinstance(event, Output):
        room = event.size if state.cap is None else max(0, min(event.size, state.cap - state.kept))
        # Built directly (once per chunk a job reads): dataclasses.replace costs several times more.
        return JobState(state.cap, state.kept + room, state.dropped + event.size - room, state.end)
    if isinstance(event, Exit):
        return replace(state, end=Exited(event.code))
    if isinstance(event, Kill | Quit):
        return replace(state, end=Killed())
    if isinstance(event, Tick):
        return state
    raise JobFactError("event", event)


def accepted(state: JobState, event: JobEvent) -> int:
    """How many bytes of an Output event the bounded step takes: what still fits under MAX_BYTES (0 once ended)."""
    if not isinstance(event, Output) or state.end is not None:
        return 0
    return max(0, min(event.size, MAX_BYTES - state.written))


def feed(state: JobState, event: JobEvent) -> JobState:
    """The jobs' step with kept + dropped held to MAX_BYTES: the step on the part of an output that fits."""
    if isinstance(event, Output):
        return step(state, Output(accepted(state, event)))
    return step(state, event)


def ends(state: JobState, event: JobEvent) -> End | None:
    """The end this event reports: the new end when it ends a running job, else None."""
    after = step(state, event)  # refuses what is not an event, on an ended job too
    return None if state.end is not None else after.end


def start(cap: int | None, written: int = 0) -> JobState:
    """A new running job, with `written` bytes (those a run wrote before it became a job) already counted."""
    return feed(JobState(cap=cap), Output(written))


def run(state: JobState, events: Iterable[JobEvent]) -> tuple[JobState, tuple[End, ...]]:
    """Fold `feed` over events; answer the last state and every end reported on the way."""
    reported: list[End] = []
    for event in events:
        end = ends(state, event)
        if end is not None:
            reported.append(end)
        state = feed(state, event)
    return state, tuple(reported)


# ---------------------------------------------------------------------------------------------------------------------
# The blocking-wait decision (jobs 4)


@dataclass(frozen=True, slots=True)
class EndedInTime:
    """The job ended before the deadline: its own end."""

    end: End


@dataclass(frozen=True, slots=True)
class DeadlinePassed:
    """The deadline passed at `at_ms`; the job goes on in the background."""

    at_ms: int


class Waiting(enum.Enum):
    """Not yet: the job runs and the deadline is ahead."""

    WAITING = "waiting"


WAITING = Waiting.WAITING
WaitVerdict = EndedInTime | DeadlinePassed | Waiting


def wait(state: JobState, now_ms: int, deadline_ms: int) -> WaitVerdict:
    """A blocking call's decision at `now_ms`: a passed deadline detaches at once, even when the end is ready."""
    if now_ms >= deadline_ms:
        return DeadlinePassed(now_ms)
    if state.end is not None:
        return EndedInTime(state.end)
    return WAITING


def blocking_span(timeout_ms: int | None, budget_ms: int) -> int:
    """How long a blocking call may block: its timeout (None: none asked) within the session's blocking budget."""
    budget = max(0, budget_ms)
    return budget if timeout_ms is None else min(max(0, timeout_ms), budget)


def deadline_for(now_ms: int, timeout_ms: int | None, budget_ms: int) -> int:
    """The deadline of a blocking call: now plus its `blocking_span`."""
    return now_ms + blocking_span(timeout_ms, budget_ms)


# ---------------------------------------------------------------------------------------------------------------------
# The tool-call journal (S2 "A tool call" 1 and 3): the model the Harness runs for every call

Usage = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class CallBegun:
    """The call starts (journal: slot `running`)."""


@dataclass(frozen=True, slots=True)
class CallOutput:
    """The call reports `size` result bytes (the shell's bounded output keeps them; the model counts them)."""

    size: int


@dataclass(frozen=True, slots=True)
class CallWarning:
    """A warning the call reports."""

    text: str


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One usage report, e.g. (("input_tokens", 3),)."""

    usage: Usage


@dataclass(frozen=True, slots=True)
class CallProgress:
    """A published progress update (details, diagnostics): goes to the live board, never to the journal."""

    details: str


@dataclass(frozen=True, slots=True)
class CallReturn:
    """The call returns its result."""


@dataclass(frozen=True, slots=True)
class CallFail:
    """The call fails: it settles as failed, its reason the last warning."""

    reason: str


@dataclass(frozen=True, slots=True)
class CallCancel:
    """The call is aborted: it settles from what it reported."""


CallEvent = CallBegun | CallOutput | CallWarning | CallUsage | CallProgress | CallReturn | CallFail | CallCancel


@dataclass(frozen=True, slots=True)
class StartRecord:
    """The start record (slot `running`)."""


@dataclass(frozen=True, slots=True)
class SettleRecord:
    """The settle record (slot `done`): every result byte (counted), every warning, all usage."""

    outcome: str  # "returned" | "failed" | "cancelled"
    written: int
    warnings: tuple[str, ...]
    usage: tuple[Usage, ...]


JournalRecord = StartRecord | SettleRecord


class CallPhase(enum.Enum):
    """Where a call is in its life."""

    IDLE = "idle"  # not started: events make no record
    RUNNING = "running"  # started: reports accumulate, nothing is journaled
    SETTLED = "settled"  # settled: events make no record


@dataclass(frozen=True, slots=True)
class CallState:
    """One call: its phase and what it has reported so far."""

    phase: CallPhase = CallPhase.IDLE
    written: int = 0
    warnings: tuple[str, ...] = ()
    usage: tuple[Usage, ...] = ()


def journal_step(state: CallState, event: CallEvent) -> tuple[CallState, tuple[JournalRecord, ...]]:
    """One event of a call: the next state and the records it journals (a start, a settle, or none)."""
    if state.phase is CallPhase.IDLE:
        if isinstance(event, CallBegun):
            return replace(state, phase=CallPhase.RUNNING), (StartRecord(),)
        return state, ()
    if state.phase is CallPhase.SETTLED:
        return state, ()
    if isinstance(event, CallOutput):
        return replace(state, written=state.written + max(0, event.size)), ()
    if isinstance(event, CallWarning):
        return replace(state, warnings=(*state.warnings, event.text)), ()
    if isinstance(event, CallUsage):
        return replace(state, usage=(*state.usage, event.usage)), ()
    if isinstance(event, CallReturn | CallFail | CallCancel):
        warnings = (*state.warnings, event.reason) if isinstance(event, CallFail) else state.warnings
        outcome = (
            "returned" if isinstance(event, CallReturn) else "failed" if isinstance(event, CallFail) else "cancelled"
        )
        settle = SettleRecord(outcome, state.written, warnings, state.usage)
        return replace(state, phase=CallPhase.SETTLED, warnings=warnings), (settle,)
    return state, ()  # CallProgress, or a second CallBegun: no record


def journal(events: Iterable[CallEvent]) -> tuple[JournalRecord, ...]:
    """The journal records of one call's event stream."""
    state = CallState()
    records: list[JournalRecord] = []
    for event in events:
        state, made = journal_step(state, event)
        records.extend(made)
    return tuple(records)


def journal_many(events: Iterable[tuple[str, CallEvent]]) -> tuple[tuple[str, JournalRecord], ...]:
    """Interleaved calls keyed by call id: each folds on its own; records come out in stream order."""
    states: dict[str, CallState] = {}
    records: list[tuple[str, JournalRecord]] = []
    for call_id, event in events:
        state, made = journal_step(states.get(call_id, CallState()), event)
        states[call_id] = state
        records.extend((call_id, record) for record in made)
    return tuple(records)


# ---------------------------------------------------------------------------------------------------------------------
# Rewind (jobs 6)


@dataclass(frozen=True, slots=True)
class Committed:
    """An entry commit the job table saw."""

    entry: str


@dataclass(frozen=True, slots=True)
class Started:
    """A job start the job table saw."""

    job: str


Mark = Committed | Started


@dataclass(frozen=True, slots=True)
class RewindVerdict:
    """Which running jobs a rewind stops (started after the target's commit) and which it keeps, in start order."""

    stop: tuple[str, ...]
    keep: tuple[str, ...]


def rewind(order: Sequence[Mark], running: Collection[str], target: str | None) -> RewindVerdict:
    """The running jobs a rewind to `target` stops: those started after the target's commit.

    `target` None ("none": before every entry), or an entry the order does not hold (committed before the open),
    comes before every job, so every running job stops.
    """
    seen_target = False
    before: set[str] = set()
    started: list[str] = []
    for mark in order:
        if isinstance(mark, Committed):
            if target is not None and mark.entry == target:
                seen_target = True
        elif mark.job not in before and mark.job not in started:
            started.append(mark.job)
            if not seen_target:
                before.add(mark.job)
    if not seen_target:
        before = set()  # the target comes before every job
    live = [job for job in started if job in running]
    return RewindVerdict(
        stop=tuple(job for job in live if job not in before), keep=tuple(job for job in live if job in before)
    )
