"""Tool registrations, the one place a call's output bound is resolved, and what a running tool can do (S2 "Limits"
3, "A tool call" 2-3).

A tool names its arguments as a record type (`args`: the JSON schema is generated from it, and a call's arguments
are decoded strictly into it) and its bound in `ToolRegistration.truncation` (None: the session's setting);
`reporting_for` resolves a call's `Truncation` and nothing else does. A running tool reads it through
`ToolExecutionApi.truncation`, reports output, details, diagnostics (warnings) and usage, and publishes its progress
to live observers with `publish_progress`. Nothing it reports is journaled until the call settles.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from eukhe.core.bound import Truncation
from eukhe.records.base import Record
from eukhe.records.journal import CallOutcome
from eukhe.records.output import OutputWindow

JSON = Any
ToolReturn = bytes | str | None
Execute = Callable[[Any, "ToolExecutionApi"], Awaitable[ToolReturn]]


class NoToolArgs(Record):
    """A tool that takes no arguments."""


@dataclass(frozen=True, slots=True)
class ToolRegistration:
    """A tool: its name, its arguments' record type, its output bound (None: the session's) and `execute`.

    `execute(args, api)` runs the call with the decoded `args` record; what it returns (bytes or text) is the last of
    the call's output.
    """

    name: str
    args: type[Record]
    execute: Execute
    truncation: Truncation | None = None
    description: str = ""
    runs_job: bool = False
    """The call runs a job: its id is chosen before the start is journaled (`ToolExecutionApi.job_id`), so a crash
    settles the call from that job's end."""

    @property
    def parameters(self) -> dict[str, JSON]:
        """The JSON schema of the tool's arguments, generated from its record type."""
        return msgspec.json.schema(self.args)


def reporting_for(registration: ToolRegistration, session_truncation: Truncation) -> Truncation:
    """The one place a call's Truncation is resolved: the tool's own value, else the session's setting."""
    return session_truncation if registration.truncation is None else registration.truncation


class CallReports(Protocol):
    """Where a running call's reports go (the Harness's running call: its model state and the progress board)."""

    def output(self, data: bytes) -> None: ...

    def details(self, value: JSON) -> None: ...

    def diagnostic(self, text: str) -> None: ...

    def usage(self, report: Mapping[str, int]) -> None: ...

    def publish(self) -> None: ...


class ToolExecutionApi:
    """What a running call can do: read its bound, report progress, publish it to live observers."""

    def __init__(
        self, call_id: str, reports: CallReports, truncation: Truncation, *, job_id: str | None = None
    ) -> None:
        self._call_id = call_id
        self._reports = reports
        self._truncation = truncation
        self._job_id = job_id

    @property
    def job_id(self) -> str | None:
        """The id the call's job must take (a tool that `runs_job`), as its start recorded it."""
        return self._job_id

    @property
    def call_id(self) -> str:
        """This call's id."""
        return self._call_id

    @property
    def truncation(self) -> Truncation:
        """The call's output bound, as `reporting_for` resolved it."""
        return self._truncation

    def output(self, data: bytes | str) -> None:
        """Report output bytes (bounded by the call's Truncation; an abort settles with them, published or not)."""
        self._reports.output(data.encode("utf-8") if isinstance(data, str) else data)

    def details(self, value: JSON) -> None:
        """Report the call's details (the latest value wins)."""
        self._reports.details(value)

    def diagnostic(self, text: str) -> None:
        """Report a warning; the settle carries every one."""
        self._reports.diagnostic(text)

    def usage(self, **counters: int) -> None:
        """Record one usage report while running; the settle carries every report (and their totals)."""
        self._reports.usage(counters)

    def publish_progress(self) -> None:
        """Send the call's current progress to the live observers (`watch_events`); nothing is journaled."""
        self._reports.publish()


class ToolResult(Record):
    """A settled call: its status, the bounded output, details, every warning, all usage, and its result entry."""

    call_id: str
    tool: str
    status: CallOutcome
    output: OutputWindow
    details: JSON
    warnings: tuple[str, ...]
    usage: tuple[dict[str, int], ...]  # every usage report, in order
    entry_id: str

    @property
    def usage_totals(self) -> dict[str, int]:
        """Every usage counter summed."""
        return usage_totals(self.usage)


def usage_totals(reports: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """Every counter summed over the reports (first-seen order)."""
    totals: dict[str, int] = {}
    for report in reports:
        for name, amount in report.items():
            totals[name] = totals.get(name, 0) + amount
    return totals
