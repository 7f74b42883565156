"""The model of one tool call's journal (S2 "A tool call" 1-3): what a call stream commits, and nothing else.

A call is a stream of events: output bytes, warnings, usage, progress publications, and one end (the tool returns
its last bytes, or the call is cancelled). The journal holds exactly two records: `Start` when the call begins and
one `Settle` at its end carrying every result byte, every warning and all usage. Progress is never journaled (it
goes to the live board). Events after the end are ignored: a call settles once.

The transition table, by state (before the end / ended) and event:
  running + Output/CallWarning/Usage/Publish  -> running, the settle-to-be grows (Publish changes nothing here)
  running + Return(data)                  -> ended, journal Settle("returned", everything + data)
  running + Cancel                        -> ended, journal Settle("cancelled", everything)
  ended   + any event                     -> ended, nothing
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Output:
    """The call reported output bytes (streamed to the board; kept for the settle)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class CallWarning:
    """The call reported a warning (a diagnostic)."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    """The call recorded usage: `amount` more of counter `name`."""

    name: str
    amount: int


@dataclass(frozen=True, slots=True)
class Publish:
    """The call published its progress to live observers (never journaled)."""


@dataclass(frozen=True, slots=True)
class Return:
    """The tool returned, with its last result bytes."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Cancel:
    """The call was cancelled (aborted); it settles from what it reported."""


CallEvent = Output | CallWarning | Usage | Publish | Return | Cancel


@dataclass(frozen=True, slots=True)
class Start:
    """Journal record: the call's slot is `running`."""


@dataclass(frozen=True, slots=True)
class Settle:
    """Journal record: the call's slot is `done`, with its result (one commit with the result entry)."""

    status: str  # "returned" or "cancelled"
    output: bytes
    warnings: tuple[str, ...]
    usage: tuple[tuple[str, int], ...]  # counters in first-seen order, each the sum of its amounts


JournalRecord = Start | Settle


@dataclass(frozen=True, slots=True)
class CallState:
    """What the call has reported so far, and whether it has ended."""

    output: bytes = b""
    warnings: tuple[str, ...] = ()
    usage: tuple[tuple[str, int], ...] = ()
    ended: bool = False


def add_usage(usage: tuple[tuple[str, int], ...], name: str, amount: int) -> tuple[tuple[str, int], ...]:
    """Usage with `amount` more of `name` (a new counter goes last)."""
    names = [counter for counter, _ in usage]
    if name in names:
        return tuple((counter, total + amount if counter == name else total) for counter, total in usage)
    return (*usage, (name, amount))


def step(state: CallState, event: CallEvent) -> tuple[CallState, tuple[JournalRecord, ...]]:
    """One event of a running call: the next state and the journal records it makes (the table above)."""
    if state.ended:
        return state, ()
    if isinstance(event, Output):
        return replace(state, output=state.output + event.data), ()
    if isinstance(event, CallWarning):
        return replace(state, warnings=(*state.warnings, event.text)), ()
    if isinstance(event, Usage):
        return replace(state, usage=add_usage(state.usage, event.name, event.amount)), ()
    if isinstance(event, Publish):
        return state, ()
    if isinstance(event, Return):
        ended = replace(state, output=state.output + event.data, ended=True)
        return ended, (Settle("returned", ended.output, ended.warnings, ended.usage),)
    ended = replace(state, ended=True)
    return ended, (Settle("cancelled", ended.output, ended.warnings, ended.usage),)


def journal(events: Iterable[CallEvent]) -> tuple[JournalRecord, ...]:
    """The journal of a call stream: `Start`, then whatever each event commits."""
    state = CallState()
    records: list[JournalRecord] = [Start()]
    for event in events:
        state, made = step(state, event)
        records.extend(made)
    return tuple(records)


def render(records: Iterable[JournalRecord]) -> str:
    """The journal as transcript lines (what the tie compares): `start`, `settle ...`."""
    lines: list[str] = []
    for record in records:
        if isinstance(record, Start):
            lines.append("start")
        else:
            usage = ",".join(f"{name}={total}" for name, total in record.usage)
            lines.append(
                f"settle {record.status} output={record.output.hex()} warnings={list(record.warnings)!r} usage={usage}"
            )
    return "\n".join(lines) + "\n"
