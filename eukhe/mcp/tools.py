"""The table of MCP tools: one row per tool, each a daemon op seen from a model.

A row names the tool, the daemon op it calls, its arguments record (`eukhe.records.mcp`: the op's record without
`session`), its answer record, the text a model reads of an answer (`eukhe.calls.texts`), a description written for a
model (`eukhe.calls.descriptions`, which a prompt child's loop offers too), hints for the client, and what a running
call reports as progress. Input and output schemas are generated from the records; nothing here is a hand-written
schema. A tool is one more row over an existing daemon op: its arguments record beside the others, its answer record,
its text; `python -m tools.mcp_doc` then writes its section of docs/mcp.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from eukhe.calls.catalog import CALL_TOOLS, CallTool, ProgressKind
from eukhe.calls.descriptions import DESCRIPTIONS
from eukhe.records.base import Record, convert
from eukhe.records.schema import object_schema


@dataclass(frozen=True, slots=True)
class Tool:
    """One MCP tool: its row of the call catalog (records, text, how it runs), its description, its hints."""

    call: CallTool
    description: str
    annotations: types.ToolAnnotations

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def op(self) -> str:
        """The daemon op that does the same work outside a tool call (what the CLI asks for)."""
        return self.call.op

    @property
    def args(self) -> type[Record]:
        return self.call.args

    @property
    def answer(self) -> Any:
        return self.call.answer

    @property
    def text(self) -> Callable[[Any], str]:
        return self.call.text

    @property
    def progress(self) -> ProgressKind | None:
        """What a running call reports as progress (when the client gives a progressToken)."""
        return self.call.progress

    def decode(self, arguments: dict[str, Any]) -> Record:
        """The call's arguments as the tool's record; InputError (`bad_tool_arguments`) naming the field."""
        record: Record = convert(arguments, self.args, code="bad_tool_arguments", what=self.name)
        return record

    def read_answer(self, answer: Any) -> Record:
        """The daemon's answer as the tool's answer record (strict: a drift between them is a loud error)."""
        record: Record = convert(answer, self.answer, code="daemon_protocol", what=f"the answer of {self.name}")
        return record

    def listing(self, *, structured: bool = False) -> types.Tool:
        """The tool as `tools/list` shows it; with its answer record's schema as `outputSchema` when `structured`
        (`eukhe mcp --structured`: the results then carry the record as `structuredContent`)."""
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=object_schema(self.args),
            output_schema=object_schema(self.answer) if structured else None,
            annotations=self.annotations,
        )


SHELL = types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
LOOK = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
CHANGE_FILES = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            CALL_TOOLS["bash"],
            DESCRIPTIONS["bash"],
            SHELL,
        ),
        Tool(
            CALL_TOOLS["ipython"],
            DESCRIPTIONS["ipython"],
            SHELL,
        ),
        Tool(
            CALL_TOOLS["jobs_list"],
            DESCRIPTIONS["jobs_list"],
            LOOK,
        ),
        Tool(
            CALL_TOOLS["jobs_wait"],
            DESCRIPTIONS["jobs_wait"],
            LOOK,
        ),
        Tool(
            CALL_TOOLS["jobs_cancel"],
            DESCRIPTIONS["jobs_cancel"],
            types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
        ),
        Tool(
            CALL_TOOLS["read"],
            DESCRIPTIONS["read"],
            LOOK,
        ),
        Tool(
            CALL_TOOLS["write"],
            DESCRIPTIONS["write"],
            types.ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        ),
        Tool(
            CALL_TOOLS["edit"],
            DESCRIPTIONS["edit"],
            CHANGE_FILES,
        ),
        Tool(
            CALL_TOOLS["grep"],
            DESCRIPTIONS["grep"],
            LOOK,
        ),
        Tool(
            CALL_TOOLS["glob"],
            DESCRIPTIONS["glob"],
            LOOK,
        ),
        Tool(
            CALL_TOOLS["spawn"],
            DESCRIPTIONS["spawn"],
            types.ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
            ),
        ),
        Tool(
            CALL_TOOLS["collect"],
            DESCRIPTIONS["collect"],
            LOOK,
        ),
        Tool(
            CALL_TOOLS["subagents"],
            DESCRIPTIONS["subagents"],
            LOOK,
        ),
        Tool(
            CALL_TOOLS["remote_call"],
            DESCRIPTIONS["remote_call"],
            SHELL,
        ),
        Tool(
            CALL_TOOLS["jobs_write"],
            DESCRIPTIONS["jobs_write"],
            SHELL,
        ),
        Tool(
            CALL_TOOLS["jobs_signal"],
            DESCRIPTIONS["jobs_signal"],
            SHELL,
        ),
    )
}
"""Every tool the server offers, by name."""

__all__ = ["TOOLS", "Tool", "object_schema"]
