"""MCP tasks: a long eukhe call runs on in the background while its client polls for it (docs/mcp.md, "Tasks").

The decisions are the core's (`eukhe.core.tasks`): the statuses, following a call to its end, the cancel, the TTL
and the room. This module is the shell: it keeps one server's tasks in memory, runs each one's calls through the
server's own call path (`EukheServer.settle`, so a task's result is exactly the result the call would have had,
its text fitted to the client), and serves both revisions on the SDK's low-level server:

- the Tasks utility of 2025-11-25, client-directed: a `tools/call` with a `task` field is answered at once with a
  `CreateTaskResult` (a middleware, since the SDK checks a `tools/call` result of that revision against
  `CallToolResult`); the server's `tasks` capability is added to the `initialize` result of that revision; the
  task tools are listed with `execution.taskSupport: "optional"`; `tasks/get`, `tasks/result` (it blocks until the
  end), `tasks/list`, `tasks/cancel`; a `notifications/tasks/status` when a task ends.
- the Tasks extension `io.modelcontextprotocol/tasks` of 2026-07-28, server-directed: for a request that declares
  the extension, a call of a task tool that answers "still running" (past its budget, or a wait's or collect's
  timeout) is answered with a `CreateTaskResult` (`resultType: "task"`) instead, and its task follows the job to
  its end; `tasks/get` carries the result; `tasks/update` (acknowledged: an eukhe call asks for no input) and
  `tasks/cancel`; a request that does not declare the extension gets `-32021` for these.

A task lives in the server that made it (the tasks are a server's, in memory): a stdio server's, or an HTTP
connection's. When the server stops, its tasks' calls are left to the daemon, as a call in flight is: the job runs
on to its end (`eukhe jobs wait`), but its task is gone with the server.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc
import mcp_types as types
import pydantic
import pydantic.alias_generators
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from eukhe.calls.texts import error_text
from eukhe.clock import Clock as ShellClock
from eukhe.clock import MonotonicClock
from eukhe.core import tasks as core
from eukhe.mcp.link import CALL_OP, DaemonLink
from eukhe.mcp.progress import call_with_progress
from eukhe.mcp.tools import TOOLS, Tool
from eukhe.records.children import Reports
from eukhe.records.jobs import Detached

log = logging.getLogger("eukhe.mcp")

Context = ServerRequestContext[Any, Any]
Ask = Callable[[dict[str, Any]], Awaitable[Any]]
"""How one call is asked of the daemon: its payload in, the daemon's answer out."""

RELATED_TASK = "io.modelcontextprotocol/related-task"
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
CANCEL_WAIT_S = 60.0
"""How long a `tasks/cancel` waits for the call it cancels in the daemon to end (the daemon's own wait is 30 s)."""
LIST_PAGE = 100
"""Tasks per page of `tasks/list`."""
CANCELLED_CALL = {
    "bash": "the call was cancelled before its job started",
    "ipython": "the cell was interrupted (its kernel is killed past the grace)",
    "collect": "the collect stopped waiting; the children run on",
}
"""What a call cancelled in the daemon did, for a task that knew no job of it."""
MESSAGE_CHARS = 200
"""The longest status message an ended task gets from its result's last line."""

UTILITY_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""The server's `tasks` capability under the 2025-11-25 utility."""

METHODS: dict[str, frozenset[core.Revision]] = {
    "tasks/get": frozenset(core.Revision),
    "tasks/cancel": frozenset(core.Revision),
    "tasks/result": frozenset({core.Revision.UTILITY}),
    "tasks/list": frozenset({core.Revision.UTILITY}),
    "tasks/update": frozenset({core.Revision.EXTENSION}),
}
"""The task methods and the revisions that have each; another revision gets `-32601` (Method not found)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A call ready to ask of the daemon: its tool and the `tool.call` payload (the session, the arguments, the
    client's room)."""

    tool: Tool
    payload: dict[str, Any]

    def again(self, tool: Tool, args: dict[str, Any]) -> Prepared:
        """Another call of the same session for the same client: `tool` with `args`."""
        payload = {key: value for key, value in self.payload.items() if key != "api_key"}
        return Prepared(tool, {**payload, "tool": tool.name, "args": args})


@dataclass(frozen=True, slots=True)
class Outcome:
    """A call's end as its client gets it: the result, and the tool's answer record (None when it was refused)."""

    result: types.CallToolResult
    answer: Any = None


class Caller(Protocol):
    """What tasks need of the server: its daemon link and its own call path."""

    link: DaemonLink

    def prepare(self, ctx: Context, params: types.CallToolRequestParams) -> Prepared | Outcome: ...

    async def settle(self, prepared: Prepared, ask: Ask) -> Outcome: ...

    def asker(self, ctx: Context, tool: Tool) -> Ask: ...


def task_listing(tool: types.Tool) -> types.Tool:
    """A tool as `tools/list` shows it: a task tool with `execution.taskSupport: "optional"` (2025-11-25; the
    2026-07-28 listing drops the field)."""
    if tool.name not in core.TASK_TOOLS:
        return tool
    return tool.model_copy(update={"execution": types.ToolExecution(task_support="optional")})


class Clock:
    """The tasks' times: milliseconds of the shell's clock (`eukhe.clock`), shown as ISO 8601 UTC times."""

    def __init__(self, clock: ShellClock | None = None) -> None:
        self._clock = clock or MonotonicClock()
        self._wall_ms = time.time_ns() // 1_000_000
        self._start_ms = self._clock.now_ms()

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def iso(self, ms: int) -> str:
        moment = datetime.datetime.fromtimestamp((self._wall_ms + ms - self._start_ms) / 1000, tz=datetime.UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Running:
    """One task: its facts (the core's `Task`), the call it runs, what it ended with, and how to cancel it."""

    def __init__(self, facts: core.Task, tool: str, prepared: Prepared | None, version: str, session: Any) -> None:
        self.facts = facts
        self.tool = tool
        self.prepared = prepared
        """Its first call (None: its arguments were refused, so it ended at once)."""
        self.version = version
        """The protocol version of the request that made it: its result is shaped for that version."""
        self.session = session
        """The server's session with the client that made it (a status notification goes there)."""
        self.result: types.CallToolResult | None = None
        self.error: types.ErrorData | None = None
        self.job: str | None = None
        """The job of the session's table the task runs or waits on (its cancel ends that job), once known."""
        self.plan: core.CancelJob | core.CancelCall | None = None
        self.scope = anyio.CancelScope()
        self.ended = anyio.Event()
        self.finished = anyio.Event()
        """The task's own calls are over (answered, cancelled, or left to the daemon)."""

    def heard(self, event: Any) -> None:
        """An event of the task's call: a bash run's job is in the session's table from its start."""
        if isinstance(event, dict) and event.get("type") == "started" and event.get("kind") == "bash":
            self.job = str(event.get("job"))


class Tasks:
    """One server's tasks, and the handlers that serve them."""

    def __init__(self, caller: Caller, clock: Clock | None = None, bound: int = core.MAX_TASKS) -> None:
        self.caller = caller
        self.clock = clock or Clock()
        self.bound = bound
        self._tasks: dict[str, Running] = {}  # in creation order
        self._group: anyio.abc.TaskGroup | None = None

    # ---- on the SDK's server -----------------------------------------------------------------------------------

    def serve(self, server: Server[Any]) -> None:
        """Serve tasks on `server`: its lifespan holds the tasks' calls, a middleware makes the utility's tasks and
        declares its capability, the `tools/call` handler makes the extension's, and the task methods."""
        server.extensions[core.EXTENSION_ID] = {}
        server.middleware.append(self.middleware)
        plain = server.get_request_handler("tools/call")
        assert plain is not None, "the server calls tools"

        async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> HandlerResult:
            return await self.call_tool(ctx, params, plain.handler)

        server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.task_get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self.task_result)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self.task_list)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.task_cancel)
        server.add_request_handler("tasks/update", UpdateTaskRequestParams, self.task_update)
        inner = server.lifespan

        @contextlib.asynccontextmanager
        async def lifespan(app: Server[Any]) -> AsyncIterator[Any]:
            async with anyio.create_task_group() as group, inner(app) as state:
                self._group = group
                try:
                    yield state
                finally:  # the server stops: the tasks' calls are left to the daemon, as a call in flight is
                    self._group = None
                    group.cancel_scope.cancel()

        server.lifespan = lifespan

    async def middleware(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        """The utility's part the handlers cannot do: the `tasks` capability in the `initialize` result, and a
        `tools/call` with a `task` field answered with a `CreateTaskResult` (the SDK checks a handler's `tools/call`
        result of 2025-11-25 against `CallToolResult`)."""
        if ctx.method == "initialize":
            return with_capability(await call_next(ctx))
        params = ctx.params
        if (
            ctx.method == "tools/call"
            and isinstance(params, Mapping)
            and params.get("task") is not None
            and ctx.protocol_version == core.UTILITY_VERSION
            and ctx.session.client_params is not None  # initialized
        ):
            return await self.create(ctx, params)
        return await call_next(ctx)

    # ---- making tasks ------------------------------------------------------------------------------------------

    async def create(self, ctx: Context, raw: Mapping[str, Any]) -> dict[str, Any]:
        """A utility task for a `tools/call` with a `task` field: its `CreateTaskResult`, the call started."""
        try:
            params = types.CallToolRequestParams.model_validate(raw, by_name=False)
        except ValidationError as error:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Invalid tools/call params: {error}") from None
        if params.name not in TOOLS:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}; known: {', '.join(TOOLS)}")
        if params.name not in core.TASK_TOOLS:
            message = f"Tool {params.name} does not run as a task (task tools: {', '.join(core.TASK_TOOLS)})"
            raise MCPError(code=types.METHOD_NOT_FOUND, message=message)
        prepared = self.caller.prepare(ctx, params)
        requested = params.task.ttl if params.task is not None else None
        ready = prepared if isinstance(prepared, Prepared) else None
        running = self.make(ctx, core.Revision.UTILITY, params.name, ready, core.ttl_for(requested))
        if running is None:
            message = f"Cannot create a task: this server holds {self.bound} tasks that still work (its bound)"
            raise MCPError(code=types.INTERNAL_ERROR, message=message)
        if isinstance(prepared, Outcome):  # its arguments are refused: the task ends with that refusal
            self.start(running, prepared)
        else:
            if prepared.tool.name == "jobs_wait":
                running.job = str(prepared.payload["args"]["job"])
            self.start(running, None)
        immediate = f"{params.name} runs in the background as task {running.facts.id}; its result comes at its end"
        return {"task": self.wire(running, running.facts.created_ms), "_meta": {IMMEDIATE_RESPONSE: immediate}}

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams, plain: Callable[..., Awaitable[HandlerResult]]
    ) -> HandlerResult:
        """`tools/call`: as without tasks, but under the extension a task tool's call that answers "still running"
        is answered with a task that follows it to its end."""
        if params.name not in core.TASK_TOOLS or not declares_extension(ctx):
            return await plain(ctx, params)
        prepared = self.caller.prepare(ctx, params)
        if isinstance(prepared, Outcome):
            return prepared.result
        outcome = await self.caller.settle(prepared, self.caller.asker(ctx, prepared.tool))
        if isinstance(follow_up(prepared, outcome), core.Done):
            return outcome.result
        running = self.make(ctx, core.Revision.EXTENSION, params.name, prepared, core.ttl_for(None))
        if running is None:  # no room: the call answers as without tasks
            log.warning("no room for a task (%d still work): %s answers without one", self.bound, prepared.tool.name)
            return outcome.result
        self.start(running, outcome)
        return {**on_the_wire(CreatedTask()), **self.wire(running, running.facts.created_ms)}

    def make(
        self, ctx: Context, revision: core.Revision, tool: str, prepared: Prepared | None, ttl_ms: int
    ) -> Running | None:
        """A new task of `tool` in the store (None: no room), not started."""
        now = self.clock.now_ms()
        verdict = core.admit([running.facts for running in self._tasks.values()], now, self.bound)
        if isinstance(verdict, core.Full):
            return None
        for gone in verdict.drop:
            del self._tasks[gone]
        facts = core.Task(secrets.token_urlsafe(18), revision, created_ms=now, updated_ms=now, ttl_ms=ttl_ms)
        running = self._tasks[facts.id] = Running(facts, tool, prepared, ctx.protocol_version, ctx.session)
        log.info("task %s: %s (%s)", facts.id, tool, revision.value)
        return running

    def start(self, running: Running, first: Outcome | None) -> None:
        """Run the task's calls in the server's task group (they outlive the request that made it)."""
        if self._group is None:  # not within the server's lifespan: no task
            del self._tasks[running.facts.id]
            raise MCPError(code=types.INTERNAL_ERROR, message="the server is not serving tasks")
        self._group.start_soon(self.follow, running, first)

    # ---- running a task ----------------------------------------------------------------------------------------

    async def follow(self, running: Running, first: Outcome | None) -> None:
        """The task's calls: the first (unless the request made it, or refused its arguments), then a wait on its
        job or a collect again while it answers "still running"; the last answer is the task's end."""
        prepared = running.prepared
        try:
            with running.scope:
                if first is None:
                    assert prepared is not None, "a task with a call to make"
                    outcome = await self.settle(running, prepared)
                else:
                    outcome = first
                while prepared is not None and not isinstance(step := follow_up(prepared, outcome), core.Done):
                    prepared = following(prepared, step)
                    if isinstance(step, core.Wait):
                        running.job = step.job
                    outcome = await self.settle(running, prepared)
                self.end(running, outcome)
        except Exception as error:  # a fault of the server: the task fails with it, the server serves on
            log.exception("task %s: its call failed", running.facts.id)
            running.error = types.ErrorData(code=types.INTERNAL_ERROR, message=f"the task's call failed: {error}")
            self.apply(running, core.Broke(running.error.message))
        finally:
            running.finished.set()

    async def settle(self, running: Running, prepared: Prepared) -> Outcome:
        """One call of the task, through the server's call path, its progress as the task's status message."""

        async def report(progress: float, message: str) -> None:
            self.apply(running, core.Progressed(message))

        def cancel_in_daemon() -> bool:
            return isinstance(running.plan, core.CancelCall)

        async def ask(payload: dict[str, Any]) -> Any:
            return await call_with_progress(
                self.caller.link,
                CALL_OP,
                payload,
                report,
                cancel_in_daemon=cancel_in_daemon,
                what=prepared.tool.name,
                on_event=running.heard,
            )

        return await self.caller.settle(prepared, ask)

    def end(self, running: Running, outcome: Outcome) -> None:
        """The task's last call answered: its result, its end (unless a cancel decides it)."""
        if not running.facts.cancel_asked:
            running.result = outcome.result
        self.apply(running, core.Answered(bool(outcome.result.is_error), last_line(outcome.result)))

    def apply(self, running: Running, event: core.Event) -> None:
        """A fact about the task, through the core's table; its end is announced once."""
        was_ended = running.facts.ended
        running.facts = core.step(running.facts, event, self.clock.now_ms())
        if running.facts.ended and not was_ended:
            running.ended.set()
            log.info("task %s: %s", running.facts.id, running.facts.status.value)
            if self._group is not None and running.facts.revision is core.Revision.UTILITY:
                self._group.start_soon(self.announce, running)

    async def announce(self, running: Running) -> None:
        """`notifications/tasks/status` for a utility task that ended (best effort: the client may poll only)."""
        params = types.TaskStatusNotificationParams.model_validate(self.wire(running), by_name=False)
        notification = types.TaskStatusNotification(params=params)
        try:
            await running.session.send_notification(notification)
        except Exception as error:  # the client is gone, or has no channel for it
            log.info("task %s: its status notification was not sent: %s", running.facts.id, error)

    # ---- the task methods --------------------------------------------------------------------------------------

    async def task_get(self, ctx: Context, params: types.GetTaskRequestParams) -> dict[str, Any]:
        """`tasks/get`: the task as it stands (under the extension, with its result or error once it ended)."""
        running = self.find(ctx, "tasks/get", params.task_id)
        wire = self.wire(running)
        if running.facts.revision is core.Revision.EXTENSION:
            if running.facts.status is core.Status.COMPLETED and running.result is not None:
                wire["result"] = result_wire(running.result, running.version)
            elif running.facts.status is core.Status.FAILED and running.error is not None:
                wire["error"] = running.error.model_dump(mode="json", exclude_none=True)
        return wire

    async def task_result(self, ctx: Context, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        """`tasks/result`: once the task ended (it blocks until then), what its call answered: the result, or the
        JSON-RPC error; a cancelled task's, how its job ended."""
        running = self.find(ctx, "tasks/result", params.task_id)
        await running.ended.wait()
        if running.facts.status is core.Status.FAILED and running.error is not None:
            raise MCPError(code=running.error.code, message=running.error.message)
        result = running.result
        if result is None:  # cancelled with no answer of its own
            text = running.facts.message or error_text("cancelled", "the task was cancelled")
            result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        wire = result_wire(result, running.version)
        wire["_meta"] = {
            **(wire.get("_meta") or {}),
            RELATED_TASK: on_the_wire(types.RelatedTaskMetadata(task_id=running.facts.id)),
        }
        return wire

    async def task_list(self, ctx: Context, params: types.PaginatedRequestParams) -> dict[str, Any]:
        """`tasks/list`: the tasks kept, oldest first, LIST_PAGE a page (the cursor: the last id of a page)."""
        self.check(ctx, "tasks/list")
        self.sweep()
        ids = list(self._tasks)
        start = 0
        if params.cursor is not None:
            if params.cursor not in self._tasks:
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown cursor: {params.cursor}")
            start = ids.index(params.cursor) + 1
        page = ids[start : start + LIST_PAGE]
        listed: dict[str, Any] = {"tasks": [self.wire(self._tasks[task]) for task in page]}
        if start + LIST_PAGE < len(ids):
            listed["nextCursor"] = page[-1]
        return listed

    async def task_cancel(self, ctx: Context, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        """`tasks/cancel`: the task's job is cancelled (its process group ends; a cell is interrupted), or its call
        in flight; answered once that took effect, with the task (the utility) or an acknowledgement."""
        running = self.find(ctx, "tasks/cancel", params.task_id)
        verdict = core.cancel_verdict(running.facts)
        if isinstance(verdict, core.Refuse):
            raise MCPError(code=types.INVALID_PARAMS, message=verdict.message)
        if isinstance(verdict, core.Proceed):
            await self.stop(running)
        elif isinstance(verdict, core.Join):
            await running.ended.wait()
        return self.wire(running) if running.facts.revision is core.Revision.UTILITY else {}

    async def task_update(self, ctx: Context, params: UpdateTaskRequestParams) -> dict[str, Any]:
        """`tasks/update` (the extension): acknowledged; an eukhe task never waits for input, so no response is
        outstanding and every one given is ignored."""
        self.find(ctx, "tasks/update", params.task_id)
        return {}

    async def stop(self, running: Running) -> None:
        """Cancel a working task as the core plans it; its end is `cancelled`, with how its job ended (the answer
        of a `jobs_cancel` of the job, or of a `jobs_wait` once its call was cancelled in the daemon)."""
        self.apply(running, core.CancelAsked())
        plan = running.plan = core.cancel_plan(running.job)
        if isinstance(plan, core.CancelCall):
            running.scope.cancel()  # its call is cancelled in the daemon (`cancel_in_daemon`)
            with anyio.move_on_after(CANCEL_WAIT_S):
                await running.finished.wait()
        ended = await self.job_end(running, plan)
        running.scope.cancel()  # a call still waiting on the job that ended: the daemon settles it on its own
        if ended is None:
            message = f"cancelled: {CANCELLED_CALL.get(running.tool, 'its call was cancelled in the daemon')}"
        else:
            running.result = ended.result
            message = f"cancelled: {last_line(ended.result)}"
        self.apply(running, core.Cancelled(message))

    async def job_end(self, running: Running, plan: core.CancelJob | core.CancelCall) -> Outcome | None:
        """How a cancelled task's job ended: `jobs_cancel` ends it and says how; a call cancelled in the daemon
        ended its job (a bash run whose start was heard meanwhile) and `jobs_wait` says how; None: no job."""
        if running.prepared is None or running.job is None:
            return None
        tool = "jobs_cancel" if isinstance(plan, core.CancelJob) else "jobs_wait"
        asked = running.prepared.again(TOOLS[tool], {"job": running.job})
        return await self.caller.settle(asked, self.plain_ask(asked))

    def plain_ask(self, prepared: Prepared) -> Ask:
        """A call asked with no progress and no cancel of its own."""

        async def ask(payload: dict[str, Any]) -> Any:
            return await self.caller.link.call(CALL_OP, payload, what=prepared.tool.name)

        return ask

    # ---- lookups and shapes ------------------------------------------------------------------------------------

    def check(self, ctx: Context, method: str) -> core.Revision:
        """The revision of a request for a task method; the specification's error when it has none."""
        revision = revision_of(ctx)
        if revision is None or revision not in METHODS[method]:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=method)
        if revision is core.Revision.EXTENSION and not declares_extension(ctx):
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="Missing required client capability",
                data=on_the_wire(MissingCapabilities(required_capabilities={"extensions": {core.EXTENSION_ID: {}}})),
            )
        return revision

    def find(self, ctx: Context, method: str, task_id: str) -> Running:
        """The task `task_id` for a request of `method`; -32602 when there is none (or it expired)."""
        revision = self.check(ctx, method)
        self.sweep()
        running = self._tasks.get(task_id)
        if running is None or running.facts.revision is not revision:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Failed to retrieve task: Task not found ({task_id})")
        return running

    def sweep(self) -> None:
        """Drop the tasks that expired."""
        now = self.clock.now_ms()
        for gone in [task for task, running in self._tasks.items() if core.expired(running.facts, now)]:
            del self._tasks[gone]

    def wire(self, running: Running, now_ms: int | None = None) -> dict[str, Any]:
        """The task as its revision shows it at `now_ms` (default: now): `Task`, with `ttl` and `pollInterval`, or
        with `ttlMs` and `pollIntervalMs`."""
        facts = running.facts
        ttl = core.reported_ttl(facts, self.clock.now_ms() if now_ms is None else now_ms)
        fields: dict[str, Any] = {
            "task_id": facts.id,
            "status": facts.status.value,
            "status_message": facts.message,
            "created_at": self.clock.iso(facts.created_ms),
            "last_updated_at": self.clock.iso(facts.updated_ms),
        }
        if facts.revision is core.Revision.UTILITY:
            task: pydantic.BaseModel = types.Task(**fields, ttl=ttl, poll_interval=core.POLL_INTERVAL_MS)
        else:
            task = ExtensionTask(**fields, ttl_ms=ttl, poll_interval_ms=core.POLL_INTERVAL_MS)
        return on_the_wire(task)


def on_the_wire(record: pydantic.BaseModel) -> dict[str, Any]:
    """A record as the protocol spells it: camelCase keys (the aliases), absent fields left out."""
    wire: dict[str, Any] = record.model_dump(by_alias=True, exclude_none=True, mode="json")
    return wire


class WireRecord(pydantic.BaseModel):
    """A record of the protocol that the SDK does not have: snake_case fields, camelCase on the wire (as the SDK's
    own records)."""

    model_config = pydantic.ConfigDict(alias_generator=pydantic.alias_generators.to_camel, populate_by_name=True)


class ExtensionTask(WireRecord):
    """A task as the 2026-07-28 extension shows it: its TTL and poll interval in `ttlMs` and `pollIntervalMs`."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int


class MissingCapabilities(WireRecord):
    """The data of `-32021` (Missing required client capability): the capabilities the method needs."""

    required_capabilities: dict[str, Any]


class CreatedTask(WireRecord):
    """The extension's answer to a call that goes on as a task: `resultType` "task"."""

    result_type: str = "task"


class UpdateTaskRequestParams(types.RequestParams):
    """`tasks/update` (the extension): the task, and responses to its outstanding input requests."""

    task_id: str
    input_responses: dict[str, Any] | None = None


def revision_of(ctx: Context) -> core.Revision | None:
    """The tasks a request's protocol version has: the utility (2025-11-25), the extension (2026-07-28), or none."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return core.Revision.EXTENSION
    return core.Revision.UTILITY if ctx.protocol_version == core.UTILITY_VERSION else None


def declares_extension(ctx: Context) -> bool:
    """Whether a 2026-07-28 request declares the Tasks extension among its client capabilities (per request)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or ctx.meta is None:
        return False
    capabilities = ctx.meta.get(types.CLIENT_CAPABILITIES_META_KEY)
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and core.EXTENSION_ID in extensions


def follow_up(prepared: Prepared, outcome: Outcome) -> core.Wait | core.Again | core.Done:
    """What a task does after this call's answer (`core.next_step`)."""
    answer = outcome.answer
    detached = answer.job if isinstance(answer, Detached) else None
    running = isinstance(answer, Reports) and any(report.status == "running" for report in answer.reports)
    return core.next_step(prepared.tool.name, detached_job=detached, children_running=running)


def following(prepared: Prepared, step: core.Wait | core.Again) -> Prepared:
    """The task's next call: a `jobs_wait` on the job, or the same `collect`, each with the session's whole budget
    (a timeout the model gave was for its first call; a short one again and again would only spin)."""
    if isinstance(step, core.Wait):
        return prepared.again(TOOLS["jobs_wait"], {"job": step.job})
    args = {key: value for key, value in prepared.payload["args"].items() if key != "timeout_ms"}
    return prepared.again(prepared.tool, args)


def with_capability(result: HandlerResult) -> HandlerResult:
    """An `initialize` result with the utility's `tasks` capability, when it negotiated 2025-11-25."""
    if not isinstance(result, dict) or result.get("protocolVersion") != core.UTILITY_VERSION:
        return result
    capabilities = result.get("capabilities")
    if not isinstance(capabilities, dict):
        return result
    return {**result, "capabilities": {**capabilities, "tasks": UTILITY_CAPABILITY}}


def result_wire(result: types.CallToolResult, version: str) -> dict[str, Any]:
    """A call's result as `tools/call` would have sent it at `version`."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return methods.serialize_server_result("tools/call", version, dumped)


def last_line(result: types.CallToolResult) -> str | None:
    """The last line of a result's text (its `[exit N]`, a refusal), at most MESSAGE_CHARS: an ended task's
    status message."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    lines = [line for line in "\n".join(texts).splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[-1]
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"
