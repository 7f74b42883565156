"""The table of MCP tools (issue 13, 2-3): one row per tool, each a daemon op seen from a model.

A row names the tool, the daemon op it calls, its arguments record (`eukhe.records.mcp`: the op's record without
`session`), its answer record, the text a model reads of an answer (`eukhe.mcp.results`), a description written for
a model, hints for the client, and whether a running call reports progress. Input and output schemas are generated
from the records; nothing here is a hand-written schema. A tool that lands later (the fs tools `read`, `write`,
`edit`, `grep`, `glob`; children `spawn`, `collect`, `subagents`; `remote_call`) is one more row once its daemon op
exists: its arguments record beside the others, its answer record, its text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from eukhe.core.limits import DEFAULT_LIMITS
from eukhe.mcp import results
from eukhe.records.base import Record, convert
from eukhe.records.jobs import CallAnswer, JobList
from eukhe.records.mcp import BashTool, IpythonTool, JobsCancelTool, JobsListTool, JobsWaitTool
from eukhe.records.schema import schema_of
from eukhe.records.settings import DEFAULT_BLOCKING_BUDGET_MS


@dataclass(frozen=True, slots=True)
class Tool:
    """One MCP tool: a daemon op, its records, its text, its description."""

    name: str
    op: str
    args: type[Record]
    answer: Any
    text: Callable[[Any], str]
    description: str
    annotations: types.ToolAnnotations
    progress: bool = False
    """A running call reports progress (when the client gives a progressToken): the job's bytes and lines so far."""

    def decode(self, arguments: dict[str, Any]) -> Record:
        """The call's arguments as the tool's record; InputError (`bad_tool_arguments`) naming the field."""
        record: Record = convert(arguments, self.args, code="bad_tool_arguments", what=self.name)
        return record

    def read_answer(self, answer: Any) -> Record:
        """The daemon's answer as the tool's answer record (strict: a drift between them is a loud error)."""
        record: Record = convert(answer, self.answer, code="daemon_protocol", what=f"the daemon's answer to {self.op}")
        return record

    def listing(self) -> types.Tool:
        """The tool as `tools/list` shows it."""
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=object_schema(self.args),
            output_schema=object_schema(self.answer),
            annotations=self.annotations,
        )


def object_schema(kind: Any) -> dict[str, Any]:
    """A record's JSON Schema with an object at its root (MCP asks `type: object` of input and output schemas):
    a record's own definition is lifted to the root; a union of records becomes an object that is any of them. The
    other definitions stay under `$defs`, which the root's `$ref`s name."""
    schema = schema_of(kind)
    defs: dict[str, Any] = dict(schema.pop("$defs", {}))
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        root = dict(defs[name])
        if not _referenced(name, defs):
            del defs[name]
    else:
        root = {"type": "object", **schema}
    root.pop("title", None)
    if defs:
        root["$defs"] = defs
    return root


def _referenced(name: str, value: Any) -> bool:
    """Whether `value` (a schema, or a part of one) refers to definition `name` (then it stays under `$defs`)."""
    if isinstance(value, dict):
        return value.get("$ref") == f"#/$defs/{name}" or any(_referenced(name, inner) for inner in value.values())
    if isinstance(value, list):
        return any(_referenced(name, inner) for inner in value)
    return False


SHELL = types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
LOOK = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)

BLOCKS = (
    f"It blocks at most its budget_ms (the session's budget, {DEFAULT_BLOCKING_BUDGET_MS // 1000} s by default, "
    "caps it): a run that ends in time "
    "answers with its output and exit; one that does not goes on as a background job, and the answer gives its "
    "output so far and the job id (then call jobs_wait or jobs_cancel). "
)
BOUNDED = (
    f"Output is bounded: past {DEFAULT_LIMITS.max_lines} lines or {DEFAULT_LIMITS.max_bytes // 1024} KiB (the "
    "session's defaults) you get the last part, a notice with the exact counts of what "
    "was dropped, and the path of a file holding the full output. Escape sequences are removed and progress bars "
    "collapse to their last state; the structured result has the exact counts."
)

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "bash",
            "bash",
            BashTool,
            CallAnswer,
            results.answer_text,
            "Run a shell command with bash in the session's working directory. " + BLOCKS + BOUNDED + " "
            "Cancelling the call ends the command's whole process group.",
            SHELL,
            progress=True,
        ),
        Tool(
            "ipython",
            "ipython",
            IpythonTool,
            CallAnswer,
            results.answer_text,
            "Run Python code as a cell on the session's persistent kernel: variables, imports and background tasks "
            "live on between calls; top-level await works. The answer has what the cell printed, the value of its "
            "last expression (Out:) or its traceback. " + BLOCKS + BOUNDED + " Cancelling the call interrupts the "
            "cell.",
            SHELL,
            progress=True,
        ),
        Tool(
            "jobs_list",
            "jobs.list",
            JobsListTool,
            JobList,
            results.job_list_text,
            "List the session's jobs (every bash command, and every cell that outlived its budget), running or "
            "ended: id, kind, exit, how many bytes and lines of output, command.",
            LOOK,
        ),
        Tool(
            "jobs_wait",
            "jobs.wait",
            JobsWaitTool,
            CallAnswer,
            results.answer_text,
            "Wait for a job's end, at most timeout_ms (and the session's budget): the answer is its output and exit "
            "if it ended, else its output so far and it goes on. Cancelling the wait leaves the job running. "
            + BOUNDED,
            LOOK,
            progress=True,
        ),
        Tool(
            "jobs_cancel",
            "jobs.cancel",
            JobsCancelTool,
            CallAnswer,
            results.answer_text,
            "Cancel a job: a command's whole process group is killed, a cell is interrupted (its kernel killed if "
            "it does not stop). Answers once the job ended (or is still stopping), with its output.",
            types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
        ),
    )
}
"""Every tool the server offers, by name."""
