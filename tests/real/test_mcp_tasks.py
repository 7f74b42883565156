"""MCP tasks end to end: raw JSON-RPC over the SDK's own transports (stdio, and streamable HTTP) against `eukhe mcp`
as a subprocess, each test with a private daemon (the `world` fixture).

The 2025-11-25 Tasks utility over both transports (a `bash` task polled to its end with eukhe's text, a cancelled
task's whole process group gone, refusals, `jobs_wait` and `ipython` as tasks), and the 2026-07-28 Tasks extension
over stdio and over HTTP, one request to a POST (a call that outlives its budget answered as a task; a request
without the extension answered as before). The client is raw JSON-RPC because the SDK's client checks a
`tools/call` result of 2025-11-25 against `CallToolResult`, and a `CreateTaskResult` is not one.

Waits are bounded polls of real events (a pid file written, a task's status as `tasks/get` gives it, at the poll
interval the server asks for), never bare sleeps; the sleeps inside the commands are the commands' own work.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import ClientMessageMetadata, SessionMessage

from eukhe.calls.texts import job_line
from eukhe.core.tasks import EXTENSION_ID, MAX_TTL_MS, POLL_INTERVAL_MS, TASK_TOOLS, TTL_MS, ttl_for
from eukhe.mcp.tools import TOOLS
from eukhe.procs import alive, group_alive
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_http import http_server
from tests.real.test_mcp_server import eventually, held_until, only_diagnostics, workdir

pytestmark = pytest.mark.real

DEADLINE_S = 60.0
UTILITY = "2025-11-25"
MODERN = "2026-07-28"
RELATED_TASK = "io.modelcontextprotocol/related-task"
WITH_TASKS = {"extensions": {EXTENSION_ID: {}}}


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, error: types.ErrorData) -> None:
        super().__init__(error.code, error.message)
        self.code = error.code
        self.message = error.message
        self.data = error.data


class Rpc:
    """Raw JSON-RPC requests over an SDK transport's streams; the server's notifications are kept in order."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write
        self._ids = itertools.count(1)
        self._answers: dict[Any, types.JSONRPCResponse | types.JSONRPCError] = {}
        self._arrived = anyio.Event()
        self.notifications: list[dict[str, Any]] = []
        self.headers: dict[str, str] | None = None
        """HTTP headers every request carries (the protocol version, once negotiated)."""
        self.meta: dict[str, Any] | None = None
        """The `_meta` every request carries (the 2026-07-28 envelope)."""
        self.session = ""
        """The eukhe session the server drives (from its instructions)."""

    async def pump(self) -> None:
        async for message in self._read:
            if isinstance(message, Exception):
                raise message
            found = message.message
            if isinstance(found, types.JSONRPCResponse | types.JSONRPCError):
                self._answers[found.id] = found
            elif isinstance(found, types.JSONRPCNotification):
                self.notifications.append(found.model_dump(by_alias=True, mode="json", exclude_none=True))
            self._arrived.set()
            self._arrived = anyio.Event()

    async def call(self, method: str, params: dict[str, Any] | None = None, *, meta: bool = True) -> dict[str, Any]:
        """The result of one request (RpcError for an error answer); with `meta`, the envelope's `_meta` on it."""
        ident = next(self._ids)
        if meta and self.meta is not None:
            params = {**(params or {}), "_meta": {**self.meta, **(params or {}).get("_meta", {})}}
        request = types.JSONRPCRequest(jsonrpc="2.0", id=ident, method=method, params=params)
        metadata = ClientMessageMetadata(headers=self.headers) if self.headers else None
        await self._write.send(SessionMessage(request, metadata=metadata))
        with anyio.fail_after(DEADLINE_S):
            while ident not in self._answers:
                arrived = self._arrived
                await arrived.wait()
        answer = self._answers.pop(ident)
        if isinstance(answer, types.JSONRPCError):
            raise RpcError(answer.error)
        return answer.result

    async def notify(self, method: str) -> None:
        notification = types.JSONRPCNotification(jsonrpc="2.0", method=method)
        await self._write.send(SessionMessage(notification))

    async def initialize(self, version: str = UTILITY) -> dict[str, Any]:
        """The `initialize` handshake at `version`."""
        info = {"name": "tasks-test", "version": "1"}
        result = await self.call("initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": info})
        await self.notify("notifications/initialized")
        self.headers = {"mcp-protocol-version": result["protocolVersion"]}
        found = re.search(r"session ([0-9a-f]+)", result["instructions"])
        assert found is not None, result
        self.session = found.group(1)
        return result

    async def discover(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        """`server/discover` at 2026-07-28: every later request carries the envelope with `capabilities`."""
        self.meta = {
            types.PROTOCOL_VERSION_META_KEY: MODERN,
            types.CLIENT_INFO_META_KEY: {"name": "tasks-test", "version": "1"},
            types.CLIENT_CAPABILITIES_META_KEY: capabilities,
        }
        return await self.call("server/discover")

    async def text(self, tool: str, arguments: dict[str, Any]) -> str:
        """A plain tool call's text."""
        return text_of(await self.call("tools/call", {"name": tool, "arguments": arguments}))

    async def task(self, tool: str, arguments: dict[str, Any], **task: Any) -> str:
        """A tool call as a utility task: its id, after checking the `CreateTaskResult`."""
        created = await self.call("tools/call", {"name": tool, "arguments": arguments, "task": task})
        found = created["task"]
        assert found["status"] == "working", created
        assert (found["ttl"], found["pollInterval"]) == (ttl_for(task.get("ttl")), POLL_INTERVAL_MS)
        assert found["createdAt"] == found["lastUpdatedAt"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", found["createdAt"]), found
        assert found["taskId"] in created["_meta"]["io.modelcontextprotocol/model-immediate-response"]
        return str(found["taskId"])

    async def until_ended(self, task: str) -> dict[str, Any]:
        """Poll `tasks/get` at the interval the server asks for until the task ended; the last answer."""
        with anyio.fail_after(DEADLINE_S):
            while True:
                got = await self.call("tasks/get", {"taskId": task})
                if got["status"] != "working":
                    return got
                await anyio.sleep((got.get("pollInterval") or got.get("pollIntervalMs")) / 1000)


def text_of(result: dict[str, Any]) -> str:
    """A result's first block's text."""
    block = result["content"][0]
    assert block["type"] == "text", result
    return str(block["text"])


async def refused(code: int, call: Callable[[], Any]) -> RpcError:
    """The error a request gets, checked to carry `code`."""
    with pytest.raises(RpcError) as error:
        await call()
    assert error.value.code == code, (error.value.code, error.value.message)
    return error.value


@asynccontextmanager
async def serving(read: Any, write: Any) -> AsyncIterator[Rpc]:
    rpc = Rpc(read, write)
    async with anyio.create_task_group() as group:
        group.start_soon(rpc.pump)
        try:
            yield rpc
        finally:
            group.cancel_scope.cancel()


@asynccontextmanager
async def stdio_rpc(world: DaemonEnv, *args: str) -> AsyncIterator[Rpc]:
    """`eukhe mcp ARGS` over stdio (text results, the default server), not yet initialized."""
    errlog = world.root / f"mcp-{len(list(world.root.glob('mcp-*.err')))}.err"
    params = StdioServerParameters(command=sys.executable, args=["-m", "eukhe.cli.main", "mcp", *args], env=world.env)
    with errlog.open("w") as stderr:
        async with stdio_client(params, errlog=stderr) as (read, write), serving(read, write) as rpc:
            yield rpc
    only_diagnostics(errlog.read_text())


TRANSPORTS = ["stdio", "http"]
Scenario = Callable[[Rpc], Awaitable[None]]


def over(world: DaemonEnv, transport: str, scenario: Scenario) -> None:
    """Run `scenario` against a server with the sandbox off in the world's work dir, over `transport`, initialized
    at 2025-11-25 (its listing checked first)."""
    args = ("--sandbox", "off", "--cwd", str(workdir(world)))

    async def on_stdio() -> None:
        async with stdio_rpc(world, *args) as rpc:
            await check_utility_listing(rpc)
            await scenario(rpc)

    if transport == "stdio":
        anyio.run(on_stdio)
        return
    with http_server(world, *args, structured=False) as server:

        async def on_http() -> None:
            async with (
                server.http(Authorization=f"Bearer {server.token}") as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                serving(read, write) as rpc,
            ):
                await check_utility_listing(rpc)
                await scenario(rpc)

        anyio.run(on_http)
        assert server.stop() == 0, server.stderr
        only_diagnostics(server.stderr)


async def check_utility_listing(rpc: Rpc) -> None:
    """The handshake at 2025-11-25 declares tasks, and the task tools are listed as such."""
    init = await rpc.initialize()
    assert init["protocolVersion"] == UTILITY
    assert init["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    listed = (await rpc.call("tools/list"))["tools"]
    assert [tool["name"] for tool in listed] == list(TOOLS)
    supported = {tool["name"]: tool.get("execution") for tool in listed}
    assert {name for name, execution in supported.items() if execution} == set(TASK_TOOLS)
    assert all(supported[name] == {"taskSupport": "optional"} for name in TASK_TOOLS)


def run(scenario: Callable[[], Any]) -> None:
    anyio.run(scenario)


# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_mcp_tasks_a_bash_task_polled_to_its_end_gives_eukhes_text(world: DaemonEnv, transport: str) -> None:
    async def scenario(rpc: Rpc) -> None:
        task = await rpc.task("bash", {"command": "sleep 2; echo done"}, ttl=MAX_TTL_MS * 2)
        working = await rpc.call("tasks/get", {"taskId": task})
        assert working["status"] == "working" and working["ttl"] >= MAX_TTL_MS, "a requested TTL within bounds"
        ended = await rpc.until_ended(task)
        assert (ended["status"], ended["statusMessage"]) == ("completed", "[exit 0]")
        assert ended["lastUpdatedAt"] > ended["createdAt"]
        result = await rpc.call("tasks/result", {"taskId": task})
        assert result["_meta"][RELATED_TASK] == {"taskId": task}
        assert (result["content"], result["isError"]) == ([{"type": "text", "text": "done\n[exit 0]"}], False)
        plain = await rpc.call("tools/call", {"name": "bash", "arguments": {"command": "sleep 2; echo done"}})
        assert {**result, "_meta": None} == {**plain, "_meta": None}, "the result a plain call has"
        (listed,) = (await rpc.call("tasks/list"))["tasks"]
        assert (listed["taskId"], listed["status"]) == (task, "completed")
        with anyio.fail_after(DEADLINE_S):  # the end is announced too (on HTTP, on the GET stream)
            while not any(n["method"] == "notifications/tasks/status" for n in rpc.notifications):
                await anyio.sleep(POLL_INTERVAL_MS / 1000)
        (status,) = [n["params"] for n in rpc.notifications if n["method"] == "notifications/tasks/status"]
        assert (status["taskId"], status["status"]) == (task, "completed")

    over(world, transport, scenario)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_mcp_tasks_a_cancelled_task_ends_its_jobs_whole_process_group(world: DaemonEnv, transport: str) -> None:
    pids = world.root / "pids"
    started = world.root / "cell-started"
    command = f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; sleep 301 & echo $! >> {pids}; wait"

    async def scenario(rpc: Rpc) -> None:
        task = await rpc.task("bash", {"command": command})
        members = await eventually(
            lambda: pids.exists() and len(found := pids.read_text().split()) == 3 and found, "the pid file"
        )
        group_id = os.getpgid(int(members[0]))
        assert all(os.getpgid(int(pid)) == group_id for pid in members)
        answers: list[dict[str, Any]] = []

        async def cancel() -> None:
            answers.append(await rpc.call("tasks/cancel", {"taskId": task}))

        async with anyio.create_task_group() as group:  # two cancels at once: the second joins the first
            group.start_soon(cancel)
            group.start_soon(cancel)
        cancelled, joined = answers
        assert cancelled == joined and cancelled["status"] == "cancelled", answers
        assert cancelled["statusMessage"] == "cancelled: [killed (its process group was ended)]"
        assert not group_alive(group_id), "tasks/cancel answers once the job's group is gone"
        assert not any(alive(int(pid)) for pid in members)
        result = await rpc.call("tasks/result", {"taskId": task})
        assert text_of(result) == "(no output)\n[killed (its process group was ended)]"
        again = await refused(types.INVALID_PARAMS, lambda: rpc.call("tasks/cancel", {"taskId": task}))
        assert again.message == "Cannot cancel task: already in terminal status 'cancelled'"
        assert (await rpc.call("tasks/get", {"taskId": task}))["status"] == "cancelled", "cancelled for good"
        assert "killed" in await rpc.text("jobs_list", {})
        tools = [row["tool"] for row in world.json("session", "calls", rpc.session)["calls"]]
        assert tools == ["bash", "jobs_cancel", "jobs_list"], "the task's call, its one cancel, the listing"
        assert await rpc.text("bash", {"command": "echo after"}) == "after\n[exit 0]"

        # a cell cancelled before it outlived its budget (no job yet): interrupted, the kernel's state kept
        assert await rpc.text("ipython", {"code": "kept = 'state'"}) == "(no output)"
        code = f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(300)"
        cell = await rpc.task("ipython", {"code": code, "budget_ms": 60_000})
        await eventually(started.exists, "the cell to start")
        stopped = await rpc.call("tasks/cancel", {"taskId": cell})
        interrupted = "cancelled: the cell was interrupted (its kernel is killed past the grace)"
        assert (stopped["status"], stopped["statusMessage"]) == ("cancelled", interrupted)
        assert text_of(await rpc.call("tasks/result", {"taskId": cell})) == interrupted
        assert await rpc.text("ipython", {"code": "kept"}) == "Out: 'state'"

    over(world, transport, scenario)


def test_mcp_tasks_refusals_a_failed_call_a_tool_that_is_no_task_and_unknown_tasks(world: DaemonEnv) -> None:
    async def scenario(rpc: Rpc) -> None:
        unknown_job = {"job": "job-00000000"}
        task = await rpc.task("jobs_wait", unknown_job)
        ended = await rpc.until_ended(task)
        refusal = "unknown_job: no job 'job-00000000' in this session"
        assert (ended["status"], ended["statusMessage"]) == ("failed", refusal)
        result = await rpc.call("tasks/result", {"taskId": task})
        plain = await rpc.call("tools/call", {"name": "jobs_wait", "arguments": unknown_job})
        assert (result["isError"], text_of(result)) == (True, refusal) == (plain["isError"], text_of(plain))

        bad = await rpc.task("bash", {"command": "true", "budgetMs": 5})
        assert (await rpc.until_ended(bad))["status"] == "failed"
        assert text_of(await rpc.call("tasks/result", {"taskId": bad})).startswith("bad_tool_arguments: bash: ")

        no_task = await refused(types.METHOD_NOT_FOUND, lambda: rpc.task("read", {"path": "a.txt"}))
        assert no_task.message == "Tool read does not run as a task (task tools: bash, ipython, jobs_wait, collect)"
        await refused(types.INVALID_PARAMS, lambda: rpc.task("rm_rf", {}))
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            missing = await refused(types.INVALID_PARAMS, lambda m=method: rpc.call(m, {"taskId": "nope"}))
            assert missing.message == "Failed to retrieve task: Task not found (nope)"
        await refused(types.INVALID_PARAMS, lambda: rpc.call("tasks/list", {"cursor": "nope"}))
        await refused(types.METHOD_NOT_FOUND, lambda: rpc.call("tasks/update", {"taskId": task}))
        assert [row["taskId"] for row in (await rpc.call("tasks/list"))["tasks"]] == [task, bad]
        assert await rpc.text("bash", {"command": "echo still serving"}) == "still serving\n[exit 0]"

    over(world, "stdio", scenario)


def test_mcp_tasks_a_client_of_an_earlier_revision_gets_no_tasks(world: DaemonEnv) -> None:
    async def scenario() -> None:
        async with stdio_rpc(world, "--cwd", str(workdir(world))) as rpc:
            init = await rpc.initialize("2025-06-18")
            assert init["protocolVersion"] == "2025-06-18" and "tasks" not in init["capabilities"]
            answered = await rpc.call("tools/call", {"name": "bash", "arguments": {"command": "echo hi"}, "task": {}})
            assert answered == {"content": [{"type": "text", "text": "hi\n[exit 0]"}], "isError": False}
            await refused(types.METHOD_NOT_FOUND, lambda: rpc.call("tasks/get", {"taskId": "nope"}))

    run(scenario)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_mcp_tasks_jobs_wait_and_ipython_run_as_tasks(world: DaemonEnv, transport: str) -> None:
    go = workdir(world) / "go"

    async def scenario(rpc: Rpc) -> None:
        detached = await rpc.text("bash", {"command": held_until(go), "budget_ms": 200})
        job = re.search(r"job-[0-9a-f]+", detached)
        assert job is not None and detached.endswith(job_line(job.group(0), 200)), detached
        waiting = await rpc.task("jobs_wait", {"job": job.group(0), "timeout_ms": 0})
        assert (await rpc.call("tasks/get", {"taskId": waiting}))["status"] == "working", "past its own timeout"
        go.touch()
        assert (await rpc.until_ended(waiting))["status"] == "completed"
        waited = text_of(await rpc.call("tasks/result", {"taskId": waiting}))
        assert waited == "start\ndone\n[exit 0]", waited

        cell = await rpc.task("ipython", {"code": "import time\ntime.sleep(1)\n6 * 7"})
        assert (await rpc.until_ended(cell))["statusMessage"] == "Out: 42"
        assert text_of(await rpc.call("tasks/result", {"taskId": cell})) == "Out: 42"

        # a cell past its budget becomes a job, and its task waits for that job's end
        later = await rpc.task("ipython", {"code": "time.sleep(1.5)\nx = 6 * 7\nx", "budget_ms": 300})
        assert (await rpc.until_ended(later))["status"] == "completed"
        followed = text_of(await rpc.call("tasks/result", {"taskId": later}))
        assert followed == "Out: 42", "the end of the cell's job, as a wait gives it"
        (cell_job,) = [line for line in (await rpc.text("jobs_list", {})).splitlines() if "  cell  " in line]
        assert "  cell  exit 0 " in cell_job, "the cell outlived its budget as a job, and its task waited for it"
        assert await rpc.text("ipython", {"code": "x"}) == "Out: 42", "the kernel kept the cell's state"

    over(world, transport, scenario)


def test_mcp_tasks_the_extension_makes_a_task_of_a_call_past_its_budget(world: DaemonEnv) -> None:
    go = workdir(world) / "go"
    started = world.root / "cell-started"
    child = f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\nrlm.answer(7)"

    async def scenario() -> None:
        async with stdio_rpc(world, "--sandbox", "off", "--cwd", str(workdir(world))) as rpc:
            found = await rpc.discover(WITH_TASKS)
            assert found["capabilities"]["extensions"] == {EXTENSION_ID: {}}
            assert await rpc.text("bash", {"command": "echo quick"}) == "quick\n[exit 0]", "in time: no task"
            created = await rpc.call(
                "tools/call", {"name": "bash", "arguments": {"command": "sleep 2; echo done", "budget_ms": 300}}
            )
            assert (created["resultType"], created["status"]) == ("task", "working"), created
            assert (created["ttlMs"], created["pollIntervalMs"]) == (TTL_MS, POLL_INTERVAL_MS)
            ended = await rpc.until_ended(created["taskId"])
            assert ended["status"] == "completed" and ended["resultType"] == "complete"
            assert (ended["result"]["content"], ended["result"]["isError"]) == (
                [{"type": "text", "text": "done\n[exit 0]"}],
                False,
            )

            # a request that does not declare the extension gets no task, and no task methods
            bare = {"name": "bash", "arguments": {"command": held_until(go), "budget_ms": 200}}
            rpc.meta = {**(rpc.meta or {}), types.CLIENT_CAPABILITIES_META_KEY: {}}
            detached = text_of(await rpc.call("tools/call", bare))
            assert "still running after 200 ms as job" in detached
            missing = await refused(-32021, lambda: rpc.call("tasks/get", {"taskId": created["taskId"]}))
            assert missing.data == {"requiredCapabilities": WITH_TASKS}
            rpc.meta[types.CLIENT_CAPABILITIES_META_KEY] = WITH_TASKS
            await refused(types.METHOD_NOT_FOUND, lambda: rpc.call("tasks/result", {"taskId": created["taskId"]}))
            await refused(types.METHOD_NOT_FOUND, lambda: rpc.call("tasks/list"))
            await refused(types.INVALID_PARAMS, lambda: rpc.call("tasks/get", {"taskId": "nope"}))
            assert await rpc.call("tasks/update", {"taskId": created["taskId"], "inputResponses": {}}) == {
                "resultType": "complete",
                "_meta": created["_meta"],
            }

            # a collect past its timeout: its task collects again until the child answers
            spawned = await rpc.call("tools/call", {"name": "spawn", "arguments": {"name": "worker", "code": child}})
            assert not spawned["isError"], spawned
            collecting = await rpc.call("tools/call", {"name": "collect", "arguments": {"timeout_ms": 100}})
            assert collecting["resultType"] == "task", collecting
            go.touch()
            collected = await rpc.until_ended(collecting["taskId"])
            assert text_of(collected["result"]) == "worker: answered\n  answer: 7", collected

            # a cell past its budget: cancelled, its cell interrupted, the kernel's state kept
            await rpc.text("ipython", {"code": "kept = 'state'"})
            code = f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(300)"
            cell = await rpc.call("tools/call", {"name": "ipython", "arguments": {"code": code, "budget_ms": 300}})
            assert cell["resultType"] == "task", cell
            assert started.exists()
            assert await rpc.call("tasks/cancel", {"taskId": cell["taskId"]}) == {
                "resultType": "complete",
                "_meta": cell["_meta"],
            }
            stopped = await rpc.call("tasks/get", {"taskId": cell["taskId"]})
            assert (stopped["status"], stopped["statusMessage"]) == ("cancelled", "cancelled: [cell interrupted]")
            assert "result" not in stopped
            assert await rpc.text("ipython", {"code": "kept"}) == "Out: 'state'"
            assert await rpc.call("tasks/cancel", {"taskId": cell["taskId"]}) == {
                "resultType": "complete",
                "_meta": cell["_meta"],
            }

    run(scenario)


def test_mcp_tasks_a_server_that_stops_leaves_its_tasks_jobs_to_the_daemon(world: DaemonEnv) -> None:
    """The client leaves while a task works: the server stops, its task with it, and the job runs on to its end."""
    go = workdir(world) / "go"

    def running(session: str) -> Any:
        jobs = world.json("jobs", "list", "--session", session)["jobs"]
        return [job["id"] for job in jobs if job["status"] == "running"]

    async def scenario() -> str:
        async with stdio_rpc(world, "--cwd", str(workdir(world))) as rpc:
            init = await rpc.initialize()
            found = re.search(r"session ([0-9a-f]+)", init["instructions"])
            assert found is not None, init
            await rpc.task("bash", {"command": held_until(go)})
            await eventually(lambda: running(found.group(1)), "the task's job to run")
        return found.group(1)

    session = anyio.run(scenario)
    (job,) = running(session)
    go.touch()
    waited = world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "20000")
    assert (waited["status"], waited["exit_code"], waited["killed"]) == ("settled", 0, False)
    assert waited["output"]["text"] == "start\ndone\n"


def test_mcp_tasks_the_extension_over_http_in_the_2026_07_28_era(world: DaemonEnv) -> None:
    """Over HTTP, each request of the 2026-07-28 era on its own POST: a call past its budget is a task, and a later
    request (another POST) polls it to its end, reads eukhe's text, and cancels another one's job."""
    from tests.real.test_mcp_conformance import modern_headers, post, request

    pids = world.root / "pids"
    ids = itertools.count(1)

    async def scenario(server: Any) -> None:
        async with server.http() as http:

            async def ask(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
                message = request(next(ids), method, params, era=MODERN)
                message["params"]["_meta"][types.CLIENT_CAPABILITIES_META_KEY] = WITH_TASKS
                status, answer = await post(http, server.url, modern_headers(server, message), message)
                assert status == 200 and "result" in answer, (status, answer)
                return dict(answer["result"])

            found = await ask("server/discover")
            assert EXTENSION_ID in found["capabilities"]["extensions"], found
            slow = {"command": "sleep 1; echo done", "budget_ms": 200}
            created = await ask("tools/call", {"name": "bash", "arguments": slow})
            assert (created["resultType"], created["status"]) == ("task", "working"), created
            with anyio.fail_after(DEADLINE_S):
                while (got := await ask("tasks/get", {"taskId": created["taskId"]}))["status"] == "working":
                    await anyio.sleep(got["pollIntervalMs"] / 1000)
            assert got["status"] == "completed", got
            assert got["result"]["content"] == [{"type": "text", "text": "done\n[exit 0]"}], got

            held = {"command": f"echo $$ > {pids}; sleep 300", "budget_ms": 200}
            running = await ask("tools/call", {"name": "bash", "arguments": held})
            assert running["resultType"] == "task", running
            await eventually(lambda: pids.exists() and pids.read_text().strip(), "the task's job to write its pid")
            group = os.getpgid(int(pids.read_text()))
            await ask("tasks/cancel", {"taskId": running["taskId"]})
            stopped = await ask("tasks/get", {"taskId": running["taskId"]})
            assert stopped["status"] == "cancelled", stopped
            await eventually(lambda: not group_alive(group), "the cancelled task's process group to end")

    with http_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:
        anyio.run(scenario, server)
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
