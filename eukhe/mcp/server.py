"""`eukhe mcp`: an MCP server over stdio that drives one eukhe session, on the official SDK (`mcp`).

One server, one session: created in a working directory by the per-user daemon (started on first use, as every CLI
command starts it), or an existing one attached by id. The session belongs to the daemon, not to the server: it
shows in `eukhe session list`, and when the client disconnects (or the server dies) its jobs go on and its calls in
flight run on in the daemon to their own end (settled, or detached at their budget; a bash run's end is journaled
as always).

Each `tools/call` is one daemon request on a connection of its own (`eukhe.mcp.link`), so calls run concurrently.
Arguments are decoded strictly as the tool's record: an unknown or mistyped argument is a tool error (`isError`)
naming the field, and so is any refusal of the daemon (an unknown job...). A result carries the model-facing text
(`eukhe.calls.texts`), cut to what the client shows its model whole (`eukhe.core.clients`, by its `clientInfo`):
clients hand a model `structuredContent` rather than the text when both are there, so the answer record goes as
`structuredContent` (with each tool's `outputSchema`) only with `--structured`, for programs that want it. A long
call can run as an MCP task, over the same call path (`prepare`, `settle`): `eukhe.mcp.tasks`.

Cancellation: the SDK cancels a handler both when the client sends `notifications/cancelled` and when the server
shuts down (its input closed). Only the first cancels the call's job in the daemon (the `cancel` op: the group ends,
or the cell is interrupted); on a shutdown the daemon is left to finish the call. stdout is the MCP channel
(`eukhe.mcp.stdio` points fd 1 at stderr while it serves, so nothing else reaches it); stderr carries diagnostics
only.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from eukhe import __version__
from eukhe.calls.texts import error_text
from eukhe.core.clients import room_for
from eukhe.core.skills import CATALOG_MAX_BYTES, catalog_text, offered
from eukhe.daemon.client import DaemonClient, connect
from eukhe.errors import EukheError, InputError, error_code, error_details
from eukhe.mcp.artifacts import ArtifactRefusedError, check_artifact, page_text, parse_artifact_uri, read_page
from eukhe.mcp.client_log import ClientLog
from eukhe.mcp.content import extra_content, has_extra_content
from eukhe.mcp.link import CALL_OP, DaemonLink
from eukhe.mcp.progress import call_with_progress
from eukhe.mcp.resources import (
    ENDED_JOB_WAIT_MS,
    RESOURCES,
    SkillFileMissingError,
    UnknownSkillError,
    discover,
    job_ended,
    job_resources,
    job_text,
    parse_job_uri,
    parse_skill_uri,
    read_skill_file,
    skill_resources,
)
from eukhe.mcp.stdio import stdio_streams
from eukhe.mcp.tasks import Ask, Outcome, Prepared, Tasks, task_listing
from eukhe.mcp.tools import TOOLS, Tool
from eukhe.records.base import convert
from eukhe.records.daemon import ToolCallAnswer
from eukhe.session.settings import load_mcp_result_max_bytes, model_key_here

log = logging.getLogger("eukhe.mcp")

Context = ServerRequestContext[Any, Any]


@dataclass(frozen=True, slots=True)
class Serving:
    """How a server shapes its results: `structured` adds the answer record (`eukhe mcp --structured`);
    `result_max_bytes` is the user's `mcp_result_max_bytes` (None: by the client)."""

    structured: bool = False
    result_max_bytes: int | None = None


DEFAULT_SERVING = Serving()
"""Text only, each client's own room."""


def client_name(ctx: Context) -> str | None:
    """The `clientInfo.name` the client gave at `initialize` (None: none known)."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    return name if isinstance(name, str) else None


@dataclass(frozen=True, slots=True)
class Target:
    """The session a server drives."""

    session: str
    cwd: str


def open_session(
    client: DaemonClient, *, cwd: str | None, session: str | None, sandbox: dict[str, Any] | None = None
) -> Target:
    """Attach to `session` (the daemon reopens it if it is closed), or create one in `cwd` (default: here), with
    the sandbox `sandbox` asks for (`{"sandbox": {"mode": ..., "network": ...}}`; none: the settings files')."""
    if session is not None:
        pong = client.call("session.ping", {"session": session})
        return Target(session=str(pong["session"]), cwd=str(pong["cwd"]))
    where = os.path.abspath(cwd if cwd is not None else os.getcwd())
    created = client.call("session.create", {"cwd": where, **(sandbox or {})})
    for notice in created.get("notices") or []:
        log.warning("%s", notice)
    if not _hinted:
        policy = client.call("session.show", {"session": created["id"]}).get("sandbox") or {}
        if policy.get("mode") != "off" and policy.get("network") == "on":
            _hinted.append(True)
            log.warning("%s", NETWORK_HINT)
    return Target(session=str(created["id"]), cwd=str(created["cwd"]))


NETWORK_HINT = (
    "confined commands reach the whole network (sandbox.network on); to let them reach only package registries "
    "and code hosts, start with --network allowlist (more hosts: --allow-domain NAME), or set "
    '"network": "allowlist" in the sandbox settings (docs/sandbox.md)'
)
"""Said once per process on stderr, when `eukhe mcp` makes a session whose network is on."""
_hinted: list[bool] = []


def instructions(target: Target) -> str:
    """What the server tells the model about itself (the `instructions` of its initialize result): what eukhe does,
    then the catalog of the skills offered for the working directory (each one's name and description), the first
    level of the skills' progressive disclosure. The whole stays within 2 KB: clients cut longer instructions."""
    base = base_instructions(target)
    room = CATALOG_MAX_BYTES - len(base.encode("utf-8", "surrogatepass")) - len(CATALOG_SEPARATOR)
    catalog = skills_catalog(target.cwd, max(room, 0))
    return base + (CATALOG_SEPARATOR + catalog if catalog else "")


CATALOG_SEPARATOR = "\n\n"


def skills_catalog(cwd: str, limit: int = CATALOG_MAX_BYTES) -> str:
    """The skills catalog for a working directory within `limit` bytes ("" when none is offered, or the skills
    cannot be read)."""
    try:
        return catalog_text(offered(discover(cwd).verdicts), limit)
    except (EukheError, OSError) as error:
        log.warning("no skills catalog for %s: %s", cwd, error)
        return ""


def base_instructions(target: Target) -> str:
    """The instructions' part about eukhe itself."""
    return (
        f"eukhe runs your shell commands (bash) and Python cells (ipython) in session {target.session}, working "
        f"directory {target.cwd}. Every output is bounded: past the limits you get one end of it, a notice with "
        "the exact counts of what was dropped, and the path of a file holding all of it. A call blocks at most its "
        "budget; past it, it goes on as a job: jobs_wait waits for it, jobs_cancel ends it (its whole process "
        "group), jobs_list shows them all. The Python kernel keeps its state between ipython calls. read, write, "
        "edit (one patch, all or nothing), grep and glob work on files; relative paths start from the working "
        "directory. spawn starts a child (Python code, or a model working on a prompt with these tools, in a "
        "session of its own, in this directory or an isolated copy handed back at its end), collect waits for "
        "children's reports, subagents lists them. Every call is journaled in the session; the resources "
        "eukhe://session/running-jobs and eukhe://session/calls show the running jobs and the calls so far."
    )


def peer_cancelled(ctx: Context) -> bool:
    """True when the client cancelled this request (`notifications/cancelled`), false when the server shuts down.

    The SDK sets the request's `cancel_requested` before it cancels the handler; mcp 2.3.0's handler context does
    not expose it, so it is read off the request's channel (the session's `_request_outbound`, its dispatch
    context). Should that change, this answers False and no job is cancelled: tests/real/test_mcp_server.py's
    cancellation test fails."""
    outbound = getattr(ctx.session, "_request_outbound", None)
    requested = getattr(outbound, "cancel_requested", None)
    return bool(requested is not None and requested.is_set())


def wants_progress(ctx: Context) -> bool:
    """The client gave a progressToken with this request."""
    return ctx.meta is not None and "progress_token" in ctx.meta


class EukheServer:
    """The MCP handlers of one server: the tools table over one session, through the daemon."""

    def __init__(self, link: DaemonLink, target: Target, serving: Serving = DEFAULT_SERVING) -> None:
        self.link = link
        self.target = target
        self.serving = serving
        self.listing = types.ListToolsResult(
            tools=[task_listing(tool.listing(structured=serving.structured)) for tool in TOOLS.values()]
        )
        self.tasks = Tasks(self)

    def sdk_server(self) -> Server[Any]:
        """The SDK's low-level server, with this server's handlers."""
        client_log = ClientLog()  # logging/setLevel: the server's diagnostics, to a client that asks for them
        server = Server(
            "eukhe",
            version=__version__,
            title="eukhe",
            description="The execution layer of a coding agent: bounded output, jobs, a persistent Python kernel.",
            instructions=instructions(self.target),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_read_resource=self.read_resource,
            lifespan=client_log.lifespan,
        )
        client_log.serve(server)
        self.tasks.serve(server)  # long calls as MCP tasks (eukhe.mcp.tasks)
        return server

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        listed = [resource.listing() for resource in RESOURCES.values()]
        try:  # the skills are found afresh at each list: a skill changed on disk shows now
            listed += await anyio.to_thread.run_sync(lambda: skill_resources(discover(self.target.cwd)))
        except (EukheError, OSError) as error:
            log.warning("skills not listed for %s: %s", self.target.cwd, error)
        try:  # the running jobs too, as they stand now
            listed += job_resources(await self.link.call("jobs.list", {"session": self.target.session}))
        except (EukheError, OSError) as error:
            log.warning("running jobs not listed: %s", error)
        return types.ListResourcesResult(resources=listed)

    async def read_resource(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        """A resource's text as it stands now (read from the session through the daemon, or a skill's file from
        the disk)."""
        if parse_skill_uri(str(params.uri)) is not None:
            return await self.read_skill_resource(str(params.uri))
        if parse_artifact_uri(str(params.uri)) is not None:
            return await self.read_artifact_resource(str(params.uri))
        job = parse_job_uri(str(params.uri))
        if job is not None:
            return await self.read_job_resource(str(params.uri), job)
        resource = RESOURCES.get(str(params.uri))
        if resource is None:
            known = ", ".join(RESOURCES)
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {params.uri}; known: {known}")
        try:
            answer = await self.link.call(resource.op, {"session": self.target.session})
            text = resource.text(answer)
        except (EukheError, OSError) as error:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{resource.uri}: {error}") from error
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=resource.uri, mime_type=resource.mime_type, text=text)]
        )

    async def read_skill_resource(self, uri: str) -> types.ReadResourceResult:
        """A skill's file, read now (an unknown skill or file: invalid params)."""
        try:
            contents = await anyio.to_thread.run_sync(lambda: read_skill_file(discover(self.target.cwd), uri))
        except (UnknownSkillError, SkillFileMissingError) as error:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}: {error}") from error
        except (EukheError, OSError) as error:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{uri}: {error}") from error
        return types.ReadResourceResult(contents=[contents])

    async def read_job_resource(self, uri: str, job: str) -> types.ReadResourceResult:
        """One job's output so far, or its end: the daemon's `jobs.wait`, for 1 ms while the job runs, and long enough
        to read its end once `jobs.list` shows it ended (a wait whose deadline has passed answers the output so far
        even when the end is there)."""
        session = self.target.session
        try:
            ended = job_ended(await self.link.call("jobs.list", {"session": session}), job)
            timeout_ms = ENDED_JOB_WAIT_MS if ended else 1
            answer = await self.link.call("jobs.wait", {"session": session, "job": job, "timeout_ms": timeout_ms})
            text = job_text(answer)
        except EukheError as error:
            code = types.INVALID_PARAMS if error_code(error) == "unknown_job" else types.INTERNAL_ERROR
            raise MCPError(code=code, message=f"{uri}: {error}") from error
        except OSError as error:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{uri}: {error}") from error
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
        )

    async def read_artifact_resource(self, uri: str) -> types.ReadResourceResult:
        """One page of an artifact of the session (eukhe.mcp.artifacts): never the whole of a large one."""
        parsed = parse_artifact_uri(uri)
        assert parsed is not None
        path, line = parsed

        def page() -> str:
            where = check_artifact(path, self.target.session)
            return page_text(where, read_page(where, line))

        try:
            text = await anyio.to_thread.run_sync(page)
        except ArtifactRefusedError as error:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown resource: {uri}: {error}") from error
        except FileNotFoundError as error:
            message = f"Unknown resource: {uri}: the artifact is gone (an artifact collection removes old ones)"
            raise MCPError(code=types.INVALID_PARAMS, message=message) from error
        except OSError as error:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{uri}: {error}") from error
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
        )

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return self.listing

    async def call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        """Run one tool call: decode its arguments, ask the session to run it as a journaled call (`tool.call`),
        show the text it settled with (or why it was refused)."""
        prepared = self.prepare(ctx, params)
        if isinstance(prepared, Outcome):
            return prepared.result
        return (await self.settle(prepared, self.asker(ctx, prepared.tool))).result

    def prepare(self, ctx: Context, params: types.CallToolRequestParams) -> Prepared | Outcome:
        """The call's daemon request, or the refusal of its arguments; an unknown tool is invalid params."""
        tool = TOOLS.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}; known: {', '.join(TOOLS)}")
        try:
            args = tool.decode(params.arguments or {})
            room = room_for(client_name(ctx), self.serving.result_max_bytes)
            payload: dict[str, Any] = {
                "session": self.target.session,
                "tool": tool.name,
                "args": args.to_json(),
                "room": {"max_bytes": room.max_bytes, "max_lines": room.max_lines},
            }
            if getattr(args, "prompt", None) is not None:  # a prompt child: the key as this server's environment has it
                payload["api_key"] = model_key_here()
        except (EukheError, OSError) as error:
            return Outcome(refusal(error))
        return Prepared(tool, payload)

    async def settle(self, prepared: Prepared, ask: Ask) -> Outcome:
        """The call asked (`ask`) and its answer as a result: the text it settled with, or why it was refused."""
        tool = prepared.tool
        try:
            settled = convert(await ask(prepared.payload), ToolCallAnswer, code="daemon_protocol", what="a call")
            answer = tool.read_answer(settled.answer)
        except (EukheError, OSError) as error:
            return Outcome(refusal(error))
        extra = await anyio.to_thread.run_sync(lambda: extra_content(answer)) if has_extra_content(answer) else []
        result = types.CallToolResult(
            content=[types.TextContent(text=settled.text), *extra],
            structured_content=answer.to_json() if self.serving.structured else None,
        )
        return Outcome(result, answer)

    def asker(self, ctx: Context, tool: Tool) -> Ask:
        """How a call of `tool` for the request `ctx` is asked of the daemon (`_ask`)."""

        async def ask(payload: dict[str, Any]) -> Any:
            return await self._ask(ctx, tool, payload)

        return ask

    async def _ask(self, ctx: Context, tool: Tool, payload: dict[str, Any]) -> Any:
        """The session's settled call; with progress reports from its board while it runs, when the client asked."""

        def cancel_in_daemon() -> bool:
            return peer_cancelled(ctx)

        if not (tool.progress and wants_progress(ctx)):
            return await self.link.call(CALL_OP, payload, cancel_in_daemon=cancel_in_daemon, what=tool.name)

        async def report(progress: float, message: str) -> None:
            await ctx.session.report_progress(progress, None, message)

        return await call_with_progress(
            self.link, CALL_OP, payload, report, cancel_in_daemon=cancel_in_daemon, what=tool.name
        )


def refusal(error: EukheError | OSError) -> types.CallToolResult:
    """A call refused (its arguments, the daemon's refusal) or that could not reach the daemon, as a tool error."""
    if isinstance(error, InputError):
        return refused(error.code, str(error))
    if isinstance(error, EukheError):
        return refused(error_code(error), str(error), error_details(error))
    return refused("daemon_unavailable", f"the daemon connection failed: {error}")


def refused(code: str, message: str, details: dict[str, object] | None = None) -> types.CallToolResult:
    """A tool error the model can read and correct (`isError`): the catalogue code, the refusal's reason when it
    has one (a file tool's: `not_found`, `patch_failed`, ...) and the message naming the field or the path. No
    `structuredContent`: it would not be the tool's answer record, and clients check that only on success."""
    reason = details.get("reason") if details is not None else None
    text = error_text(code, message, reason if isinstance(reason, str) else None)
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


async def serve(link: DaemonLink, target: Target, serving: Serving) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    server = EukheServer(link, target, serving).sdk_server()
    try:
        async with stdio_streams() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        with anyio.CancelScope(shield=True):
            await link.aclose()


def configure_logging() -> None:
    """Diagnostics go to stderr, one line each; the SDK's own only from warnings up."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("eukhe mcp[%(process)d]: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    log.setLevel(logging.INFO)


def serving_of(structured: bool) -> Serving:
    """How this server shapes results: `--structured`, and the user's `mcp_result_max_bytes` (a settings file that
    does not decode is refused: `bad_setting`, naming the file and the key)."""
    return Serving(structured=structured, result_max_bytes=load_mcp_result_max_bytes())


def run(
    socket: str,
    *,
    cwd: str | None,
    session: str | None,
    sandbox: dict[str, Any] | None = None,
    structured: bool = False,
) -> int:
    """`eukhe mcp`: open (or attach) the session, then serve until the client leaves; the exit code."""
    configure_logging()
    serving = serving_of(structured)
    with connect(socket) as client:
        target = open_session(client, cwd=cwd, session=session, sandbox=sandbox)
    log.info("serving session %s (working directory %s) over stdio", target.session, target.cwd)
    anyio.run(serve, DaemonLink(socket), target, serving)
    log.info("the client left; session %s stays in the daemon", target.session)
    return 0
