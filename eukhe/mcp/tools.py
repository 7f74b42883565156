"""The table of MCP tools: one row per tool, each a daemon op seen from a model.

A row names the tool, the daemon op it calls, its arguments record (`eukhe.records.mcp`: the op's record without
`session`), its answer record, the text a model reads of an answer (`eukhe.calls.texts`), a description written for
a model, hints for the client, and what a running call reports as progress. Input and output schemas are generated
from the records; nothing here is a hand-written schema. A tool is one more row over an existing daemon op: its
arguments record beside the others, its answer record, its text; `python -m tools.mcp_doc` then writes its section of
docs/mcp.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from eukhe.calls.catalog import CALL_TOOLS, CallTool, ProgressKind
from eukhe.core.bound import DEFAULT_LIMITS
from eukhe.core.pictures import MAX_IMAGE_BYTES, MAX_SHOWN
from eukhe.core.tty import QUIET_MS
from eukhe.records.base import Record, convert
from eukhe.records.schema import schema_of
from eukhe.records.settings import DEFAULT_BLOCKING_BUDGET_MS


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
CHANGE_FILES = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

FILES = (
    "A relative path starts from the session's working directory; an absolute path is taken as it is (~ is the "
    "home directory). "
)
FILE_BOUNDED = (
    f"The text is bounded: past {DEFAULT_LIMITS.max_lines} lines or {DEFAULT_LIMITS.max_bytes // 1024} KiB (the "
    "session's defaults) you get the first part, then a notice with the exact counts of what was dropped and the "
    "path of a file holding all of it."
)
REFUSAL = (
    " A refusal is an error naming its reason (not_found, permission_denied, sandbox, ...) and the path; sandbox "
    "means the session's sandbox policy does not allow it (a credential, or a write outside the writable roots)."
)
CONFINED = (
    "It runs in the session's sandbox (unless the session was made with --sandbox off): it may write the working "
    "directory, /tmp (private to the session) and the toolchain caches; .git/hooks, .git/config, .eukhe/ and "
    ".agents/ stay read-only, the user's credentials (~/.ssh, ~/.aws, ...) are hidden, and the network may be off. "
)

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
            CALL_TOOLS["bash"],
            "Run a shell command with bash in the session's working directory. " + CONFINED + BLOCKS + BOUNDED + " "
            "Cancelling the call ends the command's whole process group. Its input is empty (/dev/null), unless "
            "tty is true: then it runs on a terminal (cols x rows, 120 x 40 by default), and you read what the "
            "screen shows and type with jobs_write (give a small budget_ms to start a REPL or a server).",
            SHELL,
        ),
        Tool(
            CALL_TOOLS["ipython"],
            "Run Python code as a cell on the session's persistent kernel: variables, imports and background tasks "
            "live on between calls; top-level await works. The answer has what the cell printed, the value of its "
            "last expression (Out:) or its traceback. Images the cell displays (a matplotlib figure from "
            "plt.show() or as the last value, a PIL image, an object with _repr_png_, _repr_jpeg_ or _repr_svg_, "
            f"given to display() or as the last value) come back as image content, at most {MAX_SHOWN} of "
            f"{MAX_IMAGE_BYTES // 1024 // 1024} MiB each (the others are saved and named). "
            + BLOCKS
            + BOUNDED
            + " Cancelling the call interrupts the cell.",
            SHELL,
        ),
        Tool(
            CALL_TOOLS["jobs_list"],
            "List the session's jobs (every bash command, and every cell that outlived its budget), running or "
            "ended: id, kind, exit, how many bytes and lines of output, command.",
            LOOK,
        ),
        Tool(
            CALL_TOOLS["jobs_wait"],
            "Wait for a job's end, at most timeout_ms (and the session's budget): the answer is its output and exit "
            "if it ended, else its output so far and it goes on. Cancelling the wait leaves the job running. "
            + BOUNDED,
            LOOK,
        ),
        Tool(
            CALL_TOOLS["jobs_cancel"],
            "Cancel a job: a command's whole process group is killed, a cell is interrupted (its kernel killed if "
            "it does not stop). Answers once the job ended (or is still stopping), with its output.",
            types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
        ),
        Tool(
            CALL_TOOLS["read"],
            "Read a text file's lines, from line offset (1-based) for limit lines (default: the whole file). "
            + FILES
            + FILE_BOUNDED
            + " The answer ends with the range read and the file's line count, and where to read on when the text "
            "was cut. Bytes that are not UTF-8 show as U+FFFD." + REFUSAL,
            LOOK,
        ),
        Tool(
            CALL_TOOLS["write"],
            "Create a file, or replace its whole content, atomically (a reader sees the old file or the new one); "
            "missing parent directories are made. " + FILES + "Prefer edit to change part of a file." + REFUSAL,
            types.ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        ),
        Tool(
            CALL_TOOLS["edit"],
            "Change files with one patch: add, delete, update (with hunks of context, removed and added lines) or "
            "move any number of files. The patch applies completely or not at all: if any hunk is not found, "
            "nothing changes and the error (patch_failed) names the file and the hunk. Hunks match exactly, else "
            "ignoring trailing, then surrounding whitespace. A patch with no section is refused (it changes "
            "nothing); Add File onto an existing file is refused (use Update File, or Delete File first). "
            + FILES
            + "The answer lists what each section did."
            + REFUSAL,
            CHANGE_FILES,
        ),
        Tool(
            CALL_TOOLS["grep"],
            "Search files for lines matching a regular expression (no look-around or backreferences) under path, "
            "optionally only in files matching glob; .gitignore'd, hidden and binary files are skipped. Matches "
            "come as PATH:LINE:TEXT lines, sorted by path then line; the answer ends with how many matches in how "
            "many files. A regex that does not compile is refused (invalid_pattern). " + FILES + FILE_BOUNDED + REFUSAL,
            LOOK,
        ),
        Tool(
            CALL_TOOLS["glob"],
            "List the files under path whose relative path matches a glob pattern, sorted, one a line (regular "
            "files only; .gitignore'd files and, unless the pattern names them, hidden ones are left out). "
            + FILES
            + FILE_BOUNDED
            + REFUSAL,
            LOOK,
        ),
        Tool(
            CALL_TOOLS["spawn"],
            "Start a child (a subagent): its Python code runs as one cell on a kernel of its own, in a session of "
            "its own, in the background; this call answers once it started. The child works in this session's "
            "directory (workspace shared) or in a copy of it (workspace isolated), whose changes are handed back "
            "file by file when it ends. Its answer is what its code passes to rlm.answer(value), else its last "
            "expression's value. Then call collect to wait for its report, subagents to list the children.",
            types.ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
            ),
        ),
        Tool(
            CALL_TOOLS["collect"],
            "Wait for children's ends (the named ones, or all), at most timeout_ms (and the session's budget, "
            f"{DEFAULT_BLOCKING_BUDGET_MS // 1000} s by default), and give each one's report: its status "
            "(answered, failed, stalled, cancelled, or still running), its answer (JSON) or its error, and for an "
            "isolated child what was handed back (paths taken, conflicts). Cancelling the call stops the wait, "
            "never the children.",
            LOOK,
        ),
        Tool(
            CALL_TOOLS["subagents"],
            "List this session's children, in spawn order: name, status, workspace, working directory, and for an "
            "isolated child that ended what was handed back.",
            LOOK,
        ),
        Tool(
            CALL_TOOLS["remote_call"],
            "Call a function the session's kernel offers with @rlm.remote (define one in an ipython cell: "
            "`@rlm.remote` over a def with type hints). It runs beside the cells, never behind a busy one, within "
            "budget_ms (the session's budget caps it). The answer is the function's result as JSON (bounded like "
            "every output), or a typed error: not_running (no kernel), unreachable (the kernel stopped), unknown "
            "(no such function), timeout, failed (wrong arguments, an exception, or a result JSON cannot carry).",
            SHELL,
        ),
        Tool(
            CALL_TOOLS["jobs_write"],
            "Type into the terminal of a job started with bash tty=true (a REPL, a prompt, a full-screen tool): "
            'input is the keys, control characters included ("\\n" Enter, "\\u0003" Ctrl-C, "\\u0004" Ctrl-D); '
            '"" only reads. The answer is what the terminal shows since the previous answer about the job (a '
            "full-screen program such as less or top: its whole screen), once the program waits for input, its "
            f"output was quiet {QUIET_MS} ms, or budget_ms passed; if the job ended, its end and output. A job "
            "without a terminal refuses (job_has_no_terminal), an ended one says how it ended (job_ended).",
            SHELL,
        ),
        Tool(
            CALL_TOOLS["jobs_signal"],
            "Send a signal to a job's process group (a tty job's: its terminal's session and foreground group): "
            "INT (as Ctrl-C), TERM, HUP, QUIT, KILL, USR1, USR2 or WINCH; any other is refused (unknown_signal). "
            "It answers at once; jobs_wait or jobs_write then show what the job did.",
            SHELL,
        ),
    )
}
"""Every tool the server offers, by name."""
