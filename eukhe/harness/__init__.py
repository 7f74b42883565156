"""Tool calls (S2 "A tool call"): registrations, the one Truncation resolver, the progress board, the Harness."""

from __future__ import annotations

from eukhe.harness.dyn import DYN, DynamicSource, DynamicTool, DynArgs
from eukhe.harness.harness import CallNotRunningError, Harness, UnknownToolError
from eukhe.harness.tool import NoToolArgs, ToolExecutionApi, ToolRegistration, ToolResult, reporting_for

__all__ = [
    "DYN",
    "CallNotRunningError",
    "DynArgs",
    "DynamicSource",
    "DynamicTool",
    "Harness",
    "NoToolArgs",
    "ToolExecutionApi",
    "ToolRegistration",
    "ToolResult",
    "UnknownToolError",
    "reporting_for",
]
