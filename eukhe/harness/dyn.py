"""The one dynamic-call entry, `dyn` (spec S3 "@remote" 2): tools that come and go while a session runs (a kernel's
`@rlm.remote` functions, `remote/<name>`) are reached through it, never listed in the roster of built-in tools.

A `DynamicSource` offers such tools by name (`dynamic_tool(name)`) and lists the ones it has now
(`dynamic_tools()`). A `dyn` call (`{"tool": "remote/add", "args": {"a": 2, "b": 3}}`) is an ordinary tool call of
the Harness: it journals its start and its settle, its output is bounded by the session's Truncation like every
call's, and it settles `failed` (with the error as its last warning) when the tool is unknown or fails. Its
arguments go to the dynamic tool as JSON: the tool checks them against its own schema.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from eukhe.records.base import Record

JSON = Any
DYN = "dyn"
"""The entry's tool name."""


@dataclass(frozen=True, slots=True)
class DynamicTool:
    """A tool reached through `dyn`: its name, the JSON Schema of its arguments (its provider's), a description,
    and `execute(args, api)`, which gets the arguments as JSON and returns the call's last output."""

    name: str
    parameters: dict[str, JSON]
    execute: Callable[[dict[str, JSON], Any], Awaitable[bytes | str | None]]
    description: str = ""


class DynamicSource(Protocol):
    """Where dynamic tools come from (a session's kernel functions): one by name, and the ones there are now."""

    def dynamic_tool(self, name: str) -> DynamicTool | None:
        """The tool of that name, or None if this source has none."""
        ...

    def dynamic_tools(self) -> list[DynamicTool]:
        """The tools this source offers now."""
        ...


class DynArgs(Record):
    """`dyn`: the dynamic tool to call (`remote/<name>`) and its arguments."""

    tool: str
    args: dict[str, JSON] = msgspec.field(default_factory=dict)
