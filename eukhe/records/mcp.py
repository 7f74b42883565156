"""The MCP tools' argument records (issue 13, 2-3): what a model passes to each tool of `eukhe mcp`.

Each is its daemon op's arguments record (`eukhe.records.daemon`) without `session`: one MCP server drives one
session, so the server adds it. The field descriptions are written for a model; the tools' input schemas are
generated from these records (`eukhe.mcp.tools`), and decoding is the records' strict decoding, so an unknown or
mistyped argument is refused naming its field. tests/unit/test_mcp_tools.py checks that each record plus `session`
is its op's record.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from eukhe.records.base import Record
from eukhe.records.settings import DEFAULT_BLOCKING_BUDGET_MS, NonNegative

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
