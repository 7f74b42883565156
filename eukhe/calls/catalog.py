"""The tools a model calls, each a row: its arguments record, its answer record, its text, and how it runs on a
session.

A row's `run` asks the session API for the answer record; what the model reads of it is `text(answer)`
(`eukhe.calls.texts`). The same rows serve every entry point that makes tool calls (`eukhe mcp`, and the Python
API's `ToolCalls`); `eukhe.mcp.tools` adds each tool's description and hints for an MCP client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from eukhe.calls import texts
from eukhe.children.family import AgentSession
from eukhe.fs.serve import run as run_file_tool
from eukhe.harness.tool import ToolExecutionApi
from eukhe.jobs.job import Job
from eukhe.records.base import Record, convert
from eukhe.records.children import ChildRow, Reports, Roster
from eukhe.records.fs import (
    EditAnswer,
    EditArgs,
    GlobAnswer,
    GlobArgs,
    GrepAnswer,
    GrepArgs,
    ReadAnswer,
    ReadArgs,
    WriteAnswer,
    WriteArgs,
)
from eukhe.records.jobs import CallAnswer, JobList
from eukhe.records.mcp import (
    BashTool,
    CollectTool,
    EditTool,
    GlobTool,
    GrepTool,
    IpythonTool,
    JobsCancelTool,
    JobsListTool,
    JobsSignalTool,
    JobsWaitTool,
    JobsWriteTool,
    ReadTool,
    RemoteCallTool,
    SpawnTool,
    SubagentsTool,
    WriteTool,
)
from eukhe.records.remote import RemoteCallAnswer
from eukhe.records.tty import JobWriteAnswer, Signalled

ProgressKind = Literal["job", "children"]


@dataclass(frozen=True, slots=True)
class Running:
    """What a running call's `run` may use besides the session: its api (the job id its start recorded), and
    where it tells of the job it runs (`started`: the id, for a client that may cancel it; `live`: the job that
    holds its output so far, the call's progress)."""

    api: ToolExecutionApi
    started: Callable[[str], None]
    live: Callable[[Job], None]
    api_key: str | None = None
    """The key a `spawn` of a prompt child uses (the asking client's; in memory only)."""


Run = Callable[[AgentSession, Any, Running], Awaitable[Record]]


@dataclass(frozen=True, slots=True)
class CallTool:
    """One tool: its name, its arguments and answer records, the text a model reads, and how it runs."""

    name: str
    op: str
    """The daemon op a client (the CLI) asks for the same work outside a tool call."""
    args: type[Record]
    answer: Any
    text: Callable[[Any], str]
    run: Run
    runs_job: Literal["bash", "cell"] | None = None
    """The kind of job the call runs (its id is chosen before the start is journaled), or None."""
    progress: ProgressKind | None = None
    """What a running call reports as progress: its job's bytes, lines and output so far (`job`), or how many of
    the awaited children have ended (`children`)."""


async def _bash(session: AgentSession, args: BashTool, running: Running) -> CallAnswer:
    return await session.execute_bash_and_wait(
        args.command,
        args.budget_ms,
        on_start=running.started,
        on_live=running.live,
        job_id=running.api.job_id,
        tty=args.tty,
        cols=args.cols,
        rows=args.rows,
    )


async def _ipython(session: AgentSession, args: IpythonTool, running: Running) -> CallAnswer:
    return await session.ipython(
        args.code, args.budget_ms, on_start=running.started, on_live=running.live, job_id=running.api.job_id
    )


async def _jobs_list(session: AgentSession, args: JobsListTool, running: Running) -> JobList:
    return JobList(jobs=session.jobs.list())


async def _jobs_wait(session: AgentSession, args: JobsWaitTool, running: Running) -> CallAnswer:
    job = session.job_table.get(args.job)
    if job is not None:
        running.live(job)
    return await session.jobs.wait(args.job, args.timeout_ms)


async def _jobs_cancel(session: AgentSession, args: JobsCancelTool, running: Running) -> CallAnswer:
    return await session.jobs.cancel(args.job)


async def _jobs_write(session: AgentSession, args: JobsWriteTool, running: Running) -> JobWriteAnswer:
    return await session.jobs.write(args.job, args.input, args.budget_ms)


async def _jobs_signal(session: AgentSession, args: JobsSignalTool, running: Running) -> Signalled:
    return session.jobs.signal(args.job, args.signal)


def _file_tool(kind: str, record: type[Record]) -> Run:
    """A file tool: its arguments are the tool's record, run on the session's files off the event loop."""

    async def run(session: AgentSession, args: Record, running: Running) -> Record:
        decoded = convert(args.to_json(), record, code="bad_tool_arguments", what=kind)
        return await asyncio.to_thread(run_file_tool, session.files.context(), kind, decoded)

    return run


async def _spawn(session: AgentSession, args: SpawnTool, running: Running) -> ChildRow:
    return await session.children.spawn(
        args.name,
        args.code,
        workspace=args.workspace,
        timeout_ms=args.timeout_ms,
        prompt=args.prompt,
        model=args.model,
        api_key=running.api_key,
    )


async def _collect(session: AgentSession, args: CollectTool, running: Running) -> Reports:
    return Reports(reports=await session.children.collect(args.names, args.timeout_ms))


async def _subagents(session: AgentSession, args: SubagentsTool, running: Running) -> Roster:
    return Roster(children=session.children.list())


async def _remote_call(session: AgentSession, args: RemoteCallTool, running: Running) -> RemoteCallAnswer:
    return await session.remote.answer(args.name, args.args, args.budget_ms)


CALL_TOOLS: dict[str, CallTool] = {
    tool.name: tool
    for tool in (
        CallTool("bash", "bash", BashTool, CallAnswer, texts.answer_text, _bash, runs_job="bash", progress="job"),
        CallTool(
            "ipython", "ipython", IpythonTool, CallAnswer, texts.answer_text, _ipython, runs_job="cell", progress="job"
        ),
        CallTool("jobs_list", "jobs.list", JobsListTool, JobList, texts.job_list_text, _jobs_list),
        CallTool("jobs_wait", "jobs.wait", JobsWaitTool, CallAnswer, texts.answer_text, _jobs_wait, progress="job"),
        CallTool("jobs_cancel", "jobs.cancel", JobsCancelTool, CallAnswer, texts.answer_text, _jobs_cancel),
        CallTool("read", "fs.read", ReadTool, ReadAnswer, texts.read_text, _file_tool("fs.read", ReadArgs)),
        CallTool("write", "fs.write", WriteTool, WriteAnswer, texts.write_text, _file_tool("fs.write", WriteArgs)),
        CallTool("edit", "fs.edit", EditTool, EditAnswer, texts.edit_text, _file_tool("fs.edit", EditArgs)),
        CallTool("grep", "fs.grep", GrepTool, GrepAnswer, texts.grep_text, _file_tool("fs.grep", GrepArgs)),
        CallTool("glob", "fs.glob", GlobTool, GlobAnswer, texts.glob_text, _file_tool("fs.glob", GlobArgs)),
        CallTool("spawn", "children.spawn", SpawnTool, ChildRow, texts.spawn_text, _spawn),
        CallTool(
            "collect", "children.collect", CollectTool, Reports, texts.reports_text, _collect, progress="children"
        ),
        CallTool("subagents", "children.list", SubagentsTool, Roster, texts.roster_text, _subagents),
        CallTool("remote_call", "remote.call", RemoteCallTool, RemoteCallAnswer, texts.remote_text, _remote_call),
        CallTool("jobs_write", "jobs.write", JobsWriteTool, JobWriteAnswer, texts.written_text, _jobs_write),
        CallTool("jobs_signal", "jobs.signal", JobsSignalTool, Signalled, texts.signalled_text, _jobs_signal),
    )
}
"""Every tool a model calls, by name."""
