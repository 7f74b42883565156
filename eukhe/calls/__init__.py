"""Tool calls as a model makes them: the catalog of tools (`catalog`), the text a model reads of each answer
(`texts`), and `ToolCalls`, which runs every call through the session's Harness (`runner`)."""

from __future__ import annotations

from eukhe.calls.runner import ToolCalls, UnknownCallError, calls_of

__all__ = ["ToolCalls", "UnknownCallError", "calls_of"]
