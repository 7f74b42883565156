"""Tool registrations, the one place a call's output bound is resolved, and what a running tool can do (S2 "Limits"
3, "A tool call" 2-3).

A tool names its bound in `ToolRegistration.truncation` (None: the session's setting); `reporting_for` resolves a
call's `Truncation` and nothing else does. A running tool reads it through `ToolExecutionApi.truncation`, reports
output, details, diagnostics (warnings) and usage to the progress board, and publishes its progress to live
observers with `publish_progress`. Nothing it reports is journaled until the call settles.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eukhe.core.limits import Truncation
from eukhe.harness.board import CallProgress, ProgressBoard
from eukhe.output import BoundedResult

JSON = Any
ToolReturn = bytes | str | None
Execute = Callable[[Mapping[str, JSON], "ToolExecutionApi"], Awaitable[ToolReturn]]


@dataclass(frozen=True, slots=True)
class ToolRegistration:
    """A tool: its name, the JSON schema of its arguments, its output bound (None: the session's) and `execute`.

    `execute(args, api)` runs the call; what it returns (bytes or text) is the last of the call's output.
    """

    name: str
    parameters: Mapping[str, JSON]
    execute: Execute
    truncation: Truncation | None = None
    description: str = ""


def reporting_for(registration: ToolRegistration, session_truncation: Truncation) -> Truncation:
    """The one place a call's Truncation is resolved: the tool's own value, else the session's setting."""
    return session_truncation if registration.truncation is None else registration.truncation


class ToolExecutionApi:
    """What a running call can do: read its bound, report progress, publish it to live observers."""

    def __init__(self, board: ProgressBoard, progress: CallProgress, truncation: Truncation) -> None:
        self._board = board
        self._progress = progress
        self._truncation = truncation

    @property
    def call_id(self) -> str:
        """This call's id."""
        return self._progress.call

    @property
    def truncation(self) -> Truncation:
        """The call's output bound, as `reporting_for` resolved it."""
        return self._truncation

    def output(self, data: bytes | str) -> None:
        """Report output bytes (bounded by the call's Truncation; an abort settles with them, published or not)."""
        if self._progress.ended:
            return
        self._progress.output.write(data.encode("utf-8") if isinstance(data, str) else data)

    def details(self, value: JSON) -> None:
        """Report the call's details (the latest value wins)."""
        if not self._progress.ended:
            self._progress.details = value

    def diagnostic(self, text: str) -> None:
        """Report a warning; the settle carries every one."""
        if not self._progress.ended:
            self._progress.diagnostics.append(text)

    def usage(self, **counters: int) -> None:
        """Record one usage report while running; the settle carries every report (and their totals)."""
        if not self._progress.ended:
            self._progress.usage.append(dict(counters))

    def publish_progress(self) -> None:
        """Send the call's current progress to the live observers (`watch_events`); nothing is journaled."""
        self._board.publish(self._progress.call)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A settled call: its status, the bounded output, details, every warning, all usage, and its result entry."""

    call_id: str
    tool: str
    status: str  # "returned", "failed", "cancelled" or "interrupted"
    output: BoundedResult
    details: JSON
    warnings: tuple[str, ...]
    usage: tuple[Mapping[str, int], ...]  # every usage report, in order
    entry_id: str

    @property
    def usage_totals(self) -> dict[str, int]:
        """Every usage counter summed."""
        return usage_totals(self.usage)


def result_content(
    call_id: str,
    tool: str,
    status: str,
    output: BoundedResult,
    *,
    details: JSON,
    warnings: Sequence[str],
    usage: Sequence[Mapping[str, int]],
) -> dict[str, JSON]:
    """The content of a `tool_result` entry: `usage` holds the totals, `usageReports` every report in order."""
    return {
        "call": call_id,
        "tool": tool,
        "status": status,
        "output": output.as_json(),
        "details": details,
        "warnings": list(warnings),
        "usage": usage_totals(usage),
        "usageReports": [dict(report) for report in usage],
    }


def usage_totals(reports: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """Every counter summed over the reports (first-seen order)."""
    totals: dict[str, int] = {}
    for report in reports:
        for name, amount in report.items():
            totals[name] = totals.get(name, 0) + amount
    return totals
