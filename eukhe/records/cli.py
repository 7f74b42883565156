"""What CLI commands print under `--json` beyond the daemon's answers (those are the daemon records themselves).

The client path prints these with the standard json module (it must start fast); a test decodes what every command
prints strictly as its record.
"""

from __future__ import annotations

from typing import Any

from eukhe.records.base import Record
from eukhe.records.kernel_env import KernelInstalled, KernelState
from eukhe.records.output import OutputWindow


class CliError(Record):
    """Any CLI error under `--json`: the catalogue code, the message, and the input field at fault (if any)."""

    error: str
    message: str
    field: str | None = None
    details: dict[str, Any] | None = None


class RunAnswer(Record):
    """`eukhe run --json`: how the command ended and its bounded output."""

    exit_code: int
    signal: int | None
    stopped_reading: bool
    output: OutputWindow


class DaemonStarted(Record):
    """`eukhe daemon start --json`."""

    running: bool
    started: bool
    pid: int
    socket: str


class DaemonStopped(Record):
    """`eukhe daemon stop --json`: whether a daemon was stopped (and its pid), and whether one still runs."""

    running: bool
    stopped: bool
    socket: str
    pid: int | None = None


class DaemonNotRunning(Record):
    """`eukhe daemon status --json` when no daemon runs (exit 3)."""

    running: bool
    socket: str


CLI_ANSWERS: dict[str, Any] = {
    "run": RunAnswer,
    "daemon start": DaemonStarted,
    "daemon stop": DaemonStopped,
    "kernel install": KernelInstalled,
    "kernel install --check": KernelState,
}
"""Answers of the commands that do not relay a daemon answer."""
