"""The Python kernel's life (spec S3 "The protocol" 5-7): its phases, the events that move it and what each does.

The shell (`eukhe.kernel.manager`) spawns the kernel, reads its frames and waits; this table decides. Every
(phase, event) pair has an entry in `TRANSITIONS` (an ignored pair is an explicit `IGNORED` entry), each giving the
next phase, the end's reason it decides (if none was decided yet) and the effects the shell performs, in order.

A life: STARTING until the `ready` frame (READY: takes cells and calls). Then it ends one of four ways:
- asked (KILL): STOPPING, reason KILLED; a snapshot stop (SNAPSHOT_STOP) waits in STOPPING_SNAPSHOT for the
  shutdown's `done` (STOPPING, reason STOPPED) or meets a death, a kill or a fault first (no snapshot);
- unasked (its stdout closed, or a start that timed out): ENDING, reason DIED or START_FAILED;
- a protocol fault: RETIRED, reason FAULT; the stream is read only to salvage the cells' output frames;
- a host that cannot act on a frame: GONE at once, reason HOST_FAILED.
The shell's termination (stdin closed, a grace, its group killed, reaped) ends with EXITED: GONE, the one `End`.
The reason, once decided, never changes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class Phase(enum.Enum):
    """Where a kernel is in its life."""

    STARTING = "starting"  # spawned, before its `ready` frame
    READY = "ready"  # takes cells and calls
    STOPPING_SNAPSHOT = "stopping_snapshot"  # asked to write its namespace snapshot and stop
    STOPPING = "stopping"  # stopped on purpose: its termination is under way
    RETIRED = "retired"  # after a protocol fault: read only for its cells' output until it is gone
    ENDING = "ending"  # ending unasked (it died, or never started): its termination is under way
    GONE = "gone"  # what was in flight has ended; absorbs every event


class Reason(enum.Enum):
    """Why a life ended (decided once)."""

    DIED = "died"  # its stdout closed or it exited unasked
    KILLED = "killed"  # killed on purpose
    STOPPED = "stopped"  # stopped with its namespace snapshot written
    FAULT = "fault"  # a protocol fault
    START_FAILED = "start_failed"  # no `ready` within the start budget
    HOST_FAILED = "host_failed"  # the host could not act on a frame


class Event(enum.Enum):
    """What happens to a kernel: a frame kind the shell acts on, or a fact of its process."""

    READY = "ready"
    STDOUT = "stdout"
    STDERR = "stderr"
    DISPLAY = "display"
    RESULT = "result"
    ERROR = "error"
    DONE = "done"  # the `done` of a cell, an interrupt or a call
    SNAPSHOT_DONE = "snapshot_done"  # the `done` of the snapshot stop's shutdown request
    PROCESS = "process"
    DIAGNOSTIC = "diagnostic"
    HOST_REQUEST = "host_request"  # the gate admitted a host request
    REFUSAL = "refusal"  # the gate refused a host request (answered at once)
    DROPPED = "dropped"  # the gate dropped an oversized output frame
    FAULT = "fault"  # a protocol fault (the gate's, or a frame that does not fit its record)
    HOST_FAILED = "host_failed"  # acting on a frame raised
    STDOUT_CLOSED = "stdout_closed"
    KILL = "kill"
    SNAPSHOT_STOP = "snapshot_stop"  # stop with a namespace snapshot (idle culling; the kernel has a snapshot file)
    EXITED = "exited"  # the shell's termination of the process finished (reaped)
    START_TIMEOUT = "start_timeout"


FRAMES = frozenset(
    {
        Event.READY,
        Event.STDOUT,
        Event.STDERR,
        Event.DISPLAY,
        Event.RESULT,
        Event.ERROR,
        Event.DONE,
        Event.SNAPSHOT_DONE,
        Event.PROCESS,
        Event.DIAGNOSTIC,
        Event.HOST_REQUEST,
        Event.REFUSAL,
        Event.DROPPED,
    }
)
"""The events that are frames (or the gate's verdicts on them) the shell may act on."""

OUTPUT_FRAMES = frozenset({Event.STDOUT, Event.STDERR, Event.DISPLAY})
"""The frames salvaged after a fault: the cells' output."""


# ---------------------------------------------------------------------------------------------------------------------
# Effects: what the shell performs, in order


@dataclass(frozen=True, slots=True)
class Deliver:
    """Act on the frame (a cell's output, its end, a host request...)."""


@dataclass(frozen=True, slots=True)
class SettleReady:
    """The start's wait ends: the kernel is ready."""


@dataclass(frozen=True, slots=True)
class RecordFault:
    """Say the protocol repair loudly and keep the fault."""


@dataclass(frozen=True, slots=True)
class FailCalls:
    """The remote calls in flight answer `unreachable` now (a call never waits for a kill's grace)."""


@dataclass(frozen=True, slots=True)
class SendShutdown:
    """Ask the kernel to write its namespace snapshot and exit."""


@dataclass(frozen=True, slots=True)
class SettleSnapshot:
    """The snapshot stop's wait ends: `written` if the kernel answered its shutdown."""

    written: bool


@dataclass(frozen=True, slots=True)
class Terminate:
    """Start the process's termination (once): close stdin, a grace, kill its group, reap; it ends with EXITED."""


@dataclass(frozen=True, slots=True)
class End:
    """End what is in flight (cells, interrupts, the start's wait) with the life's reason: once per life."""

    reason: Reason


Effect = Deliver | SettleReady | RecordFault | FailCalls | SendShutdown | SettleSnapshot | Terminate | End


# ---------------------------------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True, slots=True)
class Transition:
    """An entry: the next phase, the reason it decides (kept if one was decided) and the effects."""

    phase: Phase
    reason: Reason | None
    effects: tuple[Effect, ...]


@dataclass(frozen=True, slots=True)
class Life:
    """A kernel's life: its phase and its end's reason (None while nothing decided its end)."""

    phase: Phase = Phase.STARTING
    reason: Reason | None = None


START = Life()

_P = Phase
_E = Event
DELIVER = Deliver()
"""The one `Deliver` in the table: `DELIVER in effects` is an identity check first."""
_DELIVER = (DELIVER,)
_TERMINATE = (FailCalls(), Terminate())
_NO_SNAPSHOT = SettleSnapshot(written=False)
_REPAIR = (RecordFault(), FailCalls(), Terminate())
_HOST_FAILED = (FailCalls(), End(Reason.HOST_FAILED), Terminate())  # the End's reason is replaced by a decided one

_LIVE = (_P.STARTING, _P.READY, _P.STOPPING_SNAPSHOT, _P.STOPPING, _P.ENDING)
"""The phases whose frames are acted on."""

_ROWS: dict[tuple[Phase, Event], Transition] = {
    # every frame of a live kernel is acted on (but `ready` once, and the snapshot's `done` in its stop only)
    **{(phase, frame): Transition(phase, None, _DELIVER) for phase in _LIVE for frame in FRAMES - {_E.READY}},
    **{(phase, _E.SNAPSHOT_DONE): Transition(phase, None, ()) for phase in _LIVE},
    # a retired kernel is read only for its cells' output
    **{(_P.RETIRED, frame): Transition(_P.RETIRED, None, _DELIVER) for frame in OUTPUT_FRAMES},
    # starting
    (_P.STARTING, _E.READY): Transition(_P.READY, None, (SettleReady(),)),
    (_P.STARTING, _E.FAULT): Transition(_P.RETIRED, Reason.FAULT, _REPAIR),
    (_P.STARTING, _E.HOST_FAILED): Transition(_P.GONE, Reason.HOST_FAILED, _HOST_FAILED),
    (_P.STARTING, _E.STDOUT_CLOSED): Transition(_P.ENDING, Reason.DIED, _TERMINATE),
    (_P.STARTING, _E.KILL): Transition(_P.STOPPING, Reason.KILLED, _TERMINATE),
    (_P.STARTING, _E.SNAPSHOT_STOP): Transition(_P.STOPPING, Reason.KILLED, _TERMINATE),  # no snapshot before ready
    (_P.STARTING, _E.EXITED): Transition(_P.GONE, Reason.DIED, (FailCalls(), End(Reason.DIED))),
    (_P.STARTING, _E.START_TIMEOUT): Transition(_P.ENDING, Reason.START_FAILED, _TERMINATE),
    # ready
    (_P.READY, _E.FAULT): Transition(_P.RETIRED, Reason.FAULT, _REPAIR),
    (_P.READY, _E.HOST_FAILED): Transition(_P.GONE, Reason.HOST_FAILED, _HOST_FAILED),
    (_P.READY, _E.STDOUT_CLOSED): Transition(_P.ENDING, Reason.DIED, _TERMINATE),
    (_P.READY, _E.KILL): Transition(_P.STOPPING, Reason.KILLED, _TERMINATE),
    (_P.READY, _E.SNAPSHOT_STOP): Transition(_P.STOPPING_SNAPSHOT, None, (FailCalls(), SendShutdown())),
    (_P.READY, _E.EXITED): Transition(_P.GONE, Reason.DIED, (FailCalls(), End(Reason.DIED))),
    # stopping with a snapshot: its `done` says the snapshot is written; anything else first means no snapshot
    (_P.STOPPING_SNAPSHOT, _E.SNAPSHOT_DONE): Transition(
        _P.STOPPING, Reason.STOPPED, (SettleSnapshot(written=True), Terminate())
    ),
    (_P.STOPPING_SNAPSHOT, _E.FAULT): Transition(_P.RETIRED, Reason.FAULT, (_NO_SNAPSHOT, *_REPAIR)),
    (_P.STOPPING_SNAPSHOT, _E.HOST_FAILED): Transition(_P.GONE, Reason.HOST_FAILED, (_NO_SNAPSHOT, *_HOST_FAILED)),
    (_P.STOPPING_SNAPSHOT, _E.STDOUT_CLOSED): Transition(_P.ENDING, Reason.DIED, (_NO_SNAPSHOT, *_TERMINATE)),
    (_P.STOPPING_SNAPSHOT, _E.KILL): Transition(_P.STOPPING, Reason.KILLED, (_NO_SNAPSHOT, *_TERMINATE)),
    (_P.STOPPING_SNAPSHOT, _E.EXITED): Transition(_P.GONE, Reason.DIED, (_NO_SNAPSHOT, FailCalls(), End(Reason.DIED))),
    # stopping or ending: the termination is under way; a fault still retires it (its reason stays)
    (_P.STOPPING, _E.FAULT): Transition(_P.RETIRED, None, (RecordFault(), FailCalls())),
    (_P.STOPPING, _E.HOST_FAILED): Transition(_P.GONE, None, _HOST_FAILED),
    (_P.STOPPING, _E.EXITED): Transition(_P.GONE, None, (End(Reason.KILLED),)),
    (_P.ENDING, _E.FAULT): Transition(_P.RETIRED, None, (RecordFault(), FailCalls())),
    (_P.ENDING, _E.HOST_FAILED): Transition(_P.GONE, None, _HOST_FAILED),
    (_P.ENDING, _E.EXITED): Transition(_P.GONE, None, (End(Reason.DIED),)),
    # retired
    (_P.RETIRED, _E.HOST_FAILED): Transition(_P.GONE, None, _HOST_FAILED),
    (_P.RETIRED, _E.EXITED): Transition(_P.GONE, None, (End(Reason.FAULT),)),
}


def _ignored(phase: Phase) -> Transition:
    return Transition(phase, None, ())


TRANSITIONS: Mapping[tuple[Phase, Event], Transition] = {
    (phase, event): _ROWS.get((phase, event), _ignored(phase)) for phase in Phase for event in Event
}
"""Every (phase, event) pair: the rows above, and every other pair explicitly ignored (same phase, no effect)."""


def step(life: Life, event: Event) -> tuple[Life, tuple[Effect, ...]]:
    """The next life and the effects of `event`; an `End` carries the life's decided reason."""
    row = TRANSITIONS[(life.phase, event)]
    if row.effects is _DELIVER:  # a frame to act on, most steps: such a row keeps the phase and decides nothing
        return life, _DELIVER
    reason = life.reason if life.reason is not None else row.reason
    effects = tuple(End(reason) if isinstance(e, End) and reason is not None else e for e in row.effects)
    return Life(row.phase, reason), effects


def run(events: Iterable[Event], life: Life = START) -> tuple[Life, tuple[Effect, ...]]:
    """Fold `events` from `life`: the last life and every effect, in order."""
    every: list[Effect] = []
    for event in events:
        life, effects = step(life, event)
        every.extend(effects)
    return life, tuple(every)


# ---------------------------------------------------------------------------------------------------------------------
# Queries


def takes_cells(life: Life) -> bool:
    """Whether a new cell may go to this kernel (else the next cell starts a fresh one)."""
    return life.phase is Phase.READY


def takes_calls(life: Life) -> bool:
    """Whether a remote call or an interrupt may go to this kernel (a call never starts one)."""
    return life.phase is Phase.READY


def salvages(life: Life, event: Event) -> bool:
    """Whether this frame is read only to salvage a cell's output (a retired kernel's output frames)."""
    return life.phase is Phase.RETIRED and event in OUTPUT_FRAMES


def acts_on(life: Life, event: Event) -> bool:
    """Whether the shell acts on this frame."""
    return DELIVER in TRANSITIONS[(life.phase, event)].effects


def reads(life: Life) -> bool:
    """Whether the kernel's stdout is still read (until what was in flight has ended)."""
    return life.phase is not Phase.GONE


def live(life: Life) -> bool:
    """Whether the kernel is the manager's to use or stop (not retired after a fault, not gone)."""
    return life.phase not in (Phase.RETIRED, Phase.GONE)


CELL_STATUS: Mapping[Reason, str] = {
    Reason.DIED: "died",
    Reason.KILLED: "killed",
    Reason.STOPPED: "killed",
    Reason.FAULT: "fault",
    Reason.START_FAILED: "died",
    Reason.HOST_FAILED: "died",
}
"""The outcome of a cell in flight when its kernel's life ends."""
