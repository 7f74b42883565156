"""The decisions of MCP logging (`logging/setLevel`, `notifications/message`): which of the server's own
diagnostics reach a client, at which level.

Rules, all in this file:
- The levels are MCP's, RFC 5424's severities, least severe first (`LEVELS`).
- A diagnostic's level is the MCP level named like its Python level (`level_of`): DEBUG debug, INFO info, WARNING
  warning, ERROR error, CRITICAL critical; a level between two Python levels takes the lower one's name.
- A client gets nothing until it sets a level; then every diagnostic at or above that level (`wanted`). Setting it
  again replaces it.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

LEVELS: tuple[Level, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's levels, least severe first (the specification's order, RFC 5424 section 6.2.1)."""

PYTHON_LEVELS: tuple[tuple[int, Level], ...] = ((50, "critical"), (40, "error"), (30, "warning"), (20, "info"))
"""Python's level numbers, most severe first, with the MCP level each one starts; below them all: debug."""


def level_of(levelno: int) -> Level:
    """The MCP level of a Python log record's level number."""
    for floor, level in PYTHON_LEVELS:
        if levelno >= floor:
            return level
    return "debug"


def wanted(level: Level, threshold: Level | None) -> bool:
    """Whether a diagnostic at `level` goes to a client that set `threshold` (None: it set none, so nothing)."""
    return threshold is not None and LEVELS.index(level) >= LEVELS.index(threshold)
