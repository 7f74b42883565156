"""Tool calls as a model makes them: the catalog of tools (`catalog`), the text a model reads of each answer
(`texts`), and `ToolCalls`, which runs every call through the session's Harness (`runner`); and a prompt child's
loop over them (`child_loop`), plugged in here as every child session's prompt run."""

from __future__ import annotations

from eukhe.calls.child_loop import run_prompt
from eukhe.calls.runner import ToolCalls, UnknownCallError, calls_of
from eukhe.children.run import plug_prompt_run

plug_prompt_run(run_prompt)

__all__ = ["ToolCalls", "UnknownCallError", "calls_of"]
