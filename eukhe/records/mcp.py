"""The MCP tools' argument records: what a model passes to each tool of `eukhe mcp`.

Each is its daemon op's arguments record (`eukhe.records.daemon`) without `session`: one MCP server drives one
session, so the server adds it. The field descriptions are written for a model; the tools' input schemas are
generated from these records (`eukhe.mcp.tools`), and decoding is the records' strict decoding, so an unknown or
mistyped argument is refused naming its field. tests/unit/test_mcp_tools.py checks that each record plus `session`
is its op's record.

Paths the file tools take are the daemon's `fs.*` paths: a relative one starts from the session's working directory
(the server's `--cwd`), an absolute one is taken as it is, `~` is the user's home (docs/fs.md, the Local transport).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from eukhe.records.base import Record
from eukhe.records.children import WorkspaceMode
from eukhe.records.settings import DEFAULT_BLOCKING_BUDGET_MS, NonNegative
from eukhe.records.tty import Cols, Rows, SignalName, Tty, WriteBudgetMs, WriteInput

BudgetMs = Annotated[
    NonNegative | None,
    msgspec.Meta(
        description=(
            f"Block at most this many milliseconds (never more than the session's budget, "
            f"{DEFAULT_BLOCKING_BUDGET_MS} by default). "
            "Past it the run goes on as a background job and the answer names the job."
        )
    ),
]
JobId = Annotated[str, msgspec.Meta(description="A job id, as a detached call or jobs_list names it (job-...).")]


class BashTool(Record):
    """Run a shell command (bash) in the session's working directory."""

    command: Annotated[str, msgspec.Meta(description="The command, as one bash script (pipes, &&, loops...).")]
    budget_ms: BudgetMs = None
    tty: Tty = False
    cols: Cols = None
    rows: Rows = None


class IpythonTool(Record):
    """Run Python code as a cell on the session's persistent kernel."""

    code: Annotated[
        str,
        msgspec.Meta(description="The cell: Python statements; the value of a last expression is the result."),
    ]
    budget_ms: BudgetMs = None


class JobsListTool(Record):
    """List the session's jobs (no arguments)."""


class JobsWaitTool(Record):
    """Wait for a job's end."""

    job: JobId
    timeout_ms: Annotated[
        NonNegative | None,
        msgspec.Meta(
            description="Wait at most this many milliseconds (never more than the session's budget); then answer "
            "with the output so far while the job goes on."
        ),
    ] = None


class JobsCancelTool(Record):
    """Cancel a job."""

    job: JobId


# --- the file tools (`fs.*`, docs/fs.md) ------------------------------------------------------------------------------

FilePath = Annotated[
    str,
    msgspec.Meta(
        description="A file's path: relative to the session's working directory, or absolute (~ is the home)."
    ),
]


class ReadTool(Record):
    """Read a text file's lines."""

    path: FilePath
    offset: Annotated[
        int | None, msgspec.Meta(description="The first line to read, 1-based (default 1: the start).")
    ] = None
    limit: Annotated[
        int | None, msgspec.Meta(description="How many lines to read from offset (default: to the end).")
    ] = None


class WriteTool(Record):
    """Create or replace a file."""

    path: FilePath
    content: Annotated[str, msgspec.Meta(description="The file's whole new content (UTF-8).")]


class EditTool(Record):
    """Apply one patch to one or more files."""

    patch: Annotated[
        str,
        msgspec.Meta(
            description=(
                "One patch, from '*** Begin Patch' to '*** End Patch'. Its sections are '*** Add File: PATH' "
                "(then every line starts with '+'), '*** Delete File: PATH', or '*** Update File: PATH' "
                "(optionally '*** Move to: NEWPATH'), then hunks: '@@' or '@@ CONTEXT_LINE', then lines starting "
                "with ' ' (context), '-' (removed) or '+' (added). It applies completely or not at all."
            )
        ),
    ]


class GrepTool(Record):
    """Search files for lines matching a regex."""

    pattern: Annotated[str, msgspec.Meta(description="A regular expression, searched in each line.")]
    path: Annotated[
        str,
        msgspec.Meta(
            description="The directory (or file) to search: relative to the session's working directory, or "
            "absolute (default: the working directory)."
        ),
    ] = "."
    glob: Annotated[
        str | None,
        msgspec.Meta(description="Only files whose path matches this glob, in gitignore syntax ('*.py', '!tests/**')."),
    ] = None


class GlobTool(Record):
    """List the files whose path matches a glob."""

    pattern: Annotated[
        str,
        msgspec.Meta(
            description="A glob of relative paths: '*' within a name, '?' one character, '[abc]' a class, '**' "
            "any number of directories ('**/*.py', 'src/**')."
        ),
    ]
    path: Annotated[
        str,
        msgspec.Meta(
            description="The directory to list under: relative to the session's working directory, or absolute "
            "(default: the working directory)."
        ),
    ] = "."


# --- children (`children.*`, eukhe/children/roster.py) ---------------------------------------------------------------

ChildNames = Annotated[
    list[str] | None,
    msgspec.Meta(description="The children to wait for, by name (default: all of the session's children)."),
]


class SpawnTool(Record):
    """Start a child: its code runs as one Python cell in a session of its own, or a model works on its prompt there."""

    name: Annotated[
        str,
        msgspec.Meta(
            description="The child's name, unique in this session: 1 to 64 letters, digits, '_', '.' or '-' "
            "(not first)."
        ),
    ]
    code: Annotated[
        str | None,
        msgspec.Meta(
            description="Python code, run as one cell on the child's own kernel in its working directory. Its "
            "answer is what it passes to rlm.answer(value), else the value of its last expression (JSON). Give "
            "code or prompt, not both."
        ),
    ] = None
    workspace: Annotated[
        WorkspaceMode,
        msgspec.Meta(
            description="'shared': the child works in the session's working directory itself. 'isolated': in a "
            "copy of it (files git ignores are not copied), whose changes are handed back file by file when the "
            "child ends (a file both changed keeps the session's content; the child's version is kept aside)."
        ),
    ] = "shared"
    timeout_ms: Annotated[
        NonNegative | None,
        msgspec.Meta(description="Stop the child if its code runs longer than this (default: never)."),
    ] = None
    prompt: Annotated[
        str | None,
        msgspec.Meta(
            description="A task for a model (the user's model setting): it works on it in the child's session with "
            "the same tools (bash, ipython, read, write, edit, grep, glob, jobs_*), may tell you things with "
            "message_parent, and answers with answer(value) or its last reply. Give code or prompt, not both."
        ),
    ] = None
    model: Annotated[
        str | None,
        msgspec.Meta(description="The model a prompt child asks (default: the model setting's name)."),
    ] = None


class CollectTool(Record):
    """Wait for children's ends; their reports."""

    names: ChildNames = None
    timeout_ms: Annotated[
        NonNegative | None,
        msgspec.Meta(
            description="Wait at most this many milliseconds (never more than the session's budget); children "
            "still running then report 'running' and go on."
        ),
    ] = None


class SubagentsTool(Record):
    """List the session's children (no arguments)."""


class RemoteCallTool(Record):
    """Call a function the session's kernel offers with `@rlm.remote` (the `dyn` entry of the remote tools)."""

    name: Annotated[
        str, msgspec.Meta(description="The function's name, as `@rlm.remote` registered it (remote/<name>).")
    ]
    args: Annotated[
        dict[str, Any],
        msgspec.Meta(description="Its keyword arguments, as a JSON object matching the function's schema."),
    ] = msgspec.field(default_factory=dict)
    budget_ms: BudgetMs = None


class JobsWriteTool(Record):
    """Type into a tty job's terminal; the output since the previous answer."""

    job: JobId
    input: WriteInput
    budget_ms: WriteBudgetMs = None


class JobsSignalTool(Record):
    """Send a signal to a job's process group."""

    job: JobId
    signal: SignalName
