"""`eukhe mcp` against the MCP specification, end to end: the official conformance runner's server scenarios over
HTTP, MCP logging, and what a client that sends what eukhe does not serve gets, over stdio and HTTP, each test with a
private daemon (the `world` fixture's env).

The conformance runner (npm, pinned in tests/npm, run by the pinned Node) sends no headers of its own, and eukhe
refuses a request without its bearer token: the runner talks to a small reverse proxy here (`BearerProxy`) that adds
the token to each request and relays each answer as it streams. The proxy adds nothing else and takes nothing away
(every other header, the body, the status, every SSE byte as it comes), so what the runner judges is eukhe's.

Waits are bounded polls of real events (a line on stderr, a file a command made, a notification received), never
bare sleeps.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
import uvicorn
import yaml
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from starlette.types import Receive, Scope, Send

from tests.npm_tools import need_npm_tool
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_http import HttpServer, http_server
from tests.real.test_mcp_server import eventually, only_diagnostics, run, workdir

pytestmark = pytest.mark.real

EXPECTED = Path(__file__).with_name("mcp_conformance_expected.yaml")
"""The runner's baseline: the scenarios eukhe does not pass, each with why."""
RUNNER_DEADLINE_S = 240.0
"""The whole suite takes seconds; only a hang reaches this."""
HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"authorization", b"upgrade"}
"""Headers the proxy does not pass on as they are (the HTTP client and uvicorn write their own; it sets the token)."""

CANCELLED = "cancelled by the client"
"""The diagnostic (INFO, on stderr) the server logs when its client cancelled a call."""


@dataclass
class Peer:
    """One initialized client session, and the log notifications it got, in order."""

    session: ClientSession
    init: types.InitializeResult
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)

    async def set_level(self, level: types.LoggingLevel) -> types.EmptyResult:
        """`logging/setLevel` (sent as a plain request: the SDK's helper warns that 2026-07-28 removed it)."""
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
        return await self.session.send_request(request, types.EmptyResult)

    def said(self, words: str) -> list[types.LoggingMessageNotificationParams]:
        return [entry for entry in self.logs if words in str(entry.data)]


@asynccontextmanager
async def stdio_peer(world: DaemonEnv, errlog: Path, *args: str) -> AsyncIterator[Peer]:
    """`eukhe mcp ARGS` under the SDK's stdio client, initialized, its log notifications kept."""
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    params = StdioServerParameters(command=sys.executable, args=["-m", "eukhe.cli.main", "mcp", *args], env=world.env)
    with errlog.open("w") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write, logging_callback=on_log) as session,
        ):
            yield Peer(session, await session.initialize(), logs)


@asynccontextmanager
async def http_peer(server: HttpServer) -> AsyncIterator[Peer]:
    """A connection of the SDK's streamable HTTP client, initialized, its log notifications kept."""
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with (
        server.http(Authorization=f"Bearer {server.token}") as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write, logging_callback=on_log) as session,
    ):
        yield Peer(session, await session.initialize(), logs)


async def cancel_a_call(peer: Peer, world: DaemonEnv, stderr: Path, name: str) -> None:
    """Start a bash call, cancel it once its command runs, and wait for the server's diagnostic of that cancel."""
    started, go = world.root / f"{name}.started", world.root / f"{name}.go"
    before = stderr.read_text().count(CANCELLED)
    async with anyio.create_task_group() as group:
        scope = anyio.CancelScope()

        async def call() -> None:
            with scope:
                await peer.session.call_tool(
                    "bash", {"command": f"touch {started}; while [ ! -e {go} ]; do sleep 0.01; done"}
                )

        group.start_soon(call)
        await eventually(started.exists, f"{name}'s command to run")
        scope.cancel()  # the client sends notifications/cancelled
    await eventually(lambda: stderr.read_text().count(CANCELLED) > before, f"{name}'s cancel on stderr")


# ---- the conformance runner ---------------------------------------------------------------------------------------


class BearerProxy:
    """An ASGI reverse proxy to `upstream` that adds `Authorization: Bearer TOKEN` to every request (in place of one
    the client sent) and relays the answer as it comes, until its end or the client leaves."""

    def __init__(self, upstream: str, token: str, client: httpx2.AsyncClient) -> None:
        self.upstream = upstream
        self.token = token
        self.client = client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = [(name, value) for name, value in scope["headers"] if name.lower() not in HOP_BY_HOP]
        headers.append((b"authorization", f"Bearer {self.token}".encode()))
        query = scope["query_string"].decode("latin-1")
        url = self.upstream + scope["path"] + (f"?{query}" if query else "")
        answer = await self.client.send(
            self.client.build_request(scope["method"], url, headers=headers, content=body), stream=True
        )
        try:
            kept = [(name.lower(), value) for name, value in answer.headers.raw if name.lower() not in HOP_BY_HOP]
            await send({"type": "http.response.start", "status": answer.status_code, "headers": kept})
            async with anyio.create_task_group() as group:

                async def until_the_client_leaves() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(until_the_client_leaves)
                async for chunk in answer.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()
        finally:
            await answer.aclose()


async def through_proxy(server: HttpServer, command: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run `command` with `{url}` in it replaced by the URL of a `BearerProxy` to `server`, while the proxy serves."""
    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    upstream = server.where.removesuffix("/mcp")
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None)) as client:
        proxy = uvicorn.Server(
            uvicorn.Config(BearerProxy(upstream, server.token, client), lifespan="off", log_config=None, ws="none")
        )
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: proxy.serve(sockets=[sock]))
                with anyio.fail_after(RUNNER_DEADLINE_S):
                    done = await anyio.run_process([part.replace("{url}", url) for part in command], check=False)
                proxy.should_exit = True
        finally:
            sock.close()
    return done


def expected_failures() -> dict[str, str]:
    """The baseline's scenarios, each with the reason its line gives after `#`."""
    names = yaml.safe_load(EXPECTED.read_text())["server"]
    reasons = dict(re.findall(r"^  - ([a-z0-9-]+) +# (.+)$", EXPECTED.read_text(), re.MULTILINE))
    assert list(reasons) == names, "each entry is one line: `  - SCENARIO  # why`"
    return reasons


def test_the_mcp_conformance_runners_server_scenarios_pass_over_http_but_the_expected_failures(
    world: DaemonEnv,
) -> None:
    runner = need_npm_tool("conformance")
    listed = subprocess.run([*runner, "list", "--server"], capture_output=True, text=True, check=True).stdout
    scenarios = re.findall(r"^  - ([a-z0-9-]+) \[", listed, re.MULTILINE)
    assert "server-initialize" in scenarios and "logging-set-level" in scenarios, listed
    expected = expected_failures()
    assert set(expected) <= set(scenarios), "every entry names a scenario of the runner"
    assert all(reason.strip() for reason in expected.values())

    results = world.root / "conformance"
    command = [*runner, "server", "--url", "{url}", "--suite", "all"]
    with http_server(world, "--cwd", str(workdir(world))) as server:
        done = anyio.run(through_proxy, server, [*command, "--expected-failures", str(EXPECTED), "-o", str(results)])
        output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        ran = {path.name.removeprefix("server-").rsplit("-20", 1)[0] for path in results.iterdir()}
        assert ran == set(scenarios), f"every scenario ran: {sorted(set(scenarios) ^ ran)}\n{output}"
        assert done.returncode == 0, f"a scenario outside the baseline failed, or one in it passed:\n{output}"
        assert "Baseline check passed" in output, output
        assert "Traceback" not in server.stderr, server.stderr
        assert server.stop() == 0, server.stderr
        only_diagnostics(server.stderr)


# ---- logging ----------------------------------------------------------------------------------------------------


def test_mcp_logging_a_stdio_client_gets_the_servers_diagnostics_from_the_level_it_set(world: DaemonEnv) -> None:
    errlog = world.root / "mcp.err"

    async def scenario() -> None:
        async with stdio_peer(world, errlog, "--sandbox", "off", "--cwd", str(workdir(world))) as peer:
            assert peer.init.capabilities.logging is not None, "the logging capability is declared"
            await cancel_a_call(peer, world, errlog, "unasked")  # no level set: nothing is sent
            assert await peer.set_level("warning") == types.EmptyResult()
            await cancel_a_call(peer, world, errlog, "below")  # an INFO diagnostic, under the level
            assert await peer.set_level("info") == types.EmptyResult()
            await cancel_a_call(peer, world, errlog, "at")
            await eventually(lambda: peer.said(CANCELLED), "the diagnostic at the level")
            (entry,) = peer.logs  # the two before it were not sent: they would have come first
            assert (entry.level, entry.logger) == ("info", "eukhe.mcp"), entry
            assert str(entry.data) in errlog.read_text(), "the same words as on stderr"
            result = await peer.session.call_tool("bash", {"command": "echo still serving"})
            assert not result.is_error and "still serving" in str(result.content[0])

    run(scenario)
    only_diagnostics(errlog.read_text())


def test_mcp_logging_over_http_a_calls_diagnostic_goes_to_its_connection_and_the_servers_to_every_one(
    world: DaemonEnv,
) -> None:
    async def reopened(server: HttpServer) -> None:
        """A connection opened and deleted: the server logs both, outside every connection's requests."""
        async with http_peer(server):
            pass

    async def scenario(server: HttpServer) -> None:
        async with http_peer(server) as first, http_peer(server) as second:
            assert first.init.capabilities.logging is not None
            await first.set_level("info")
            await second.set_level("info")

            async def everyone_hears() -> bool:  # their GET streams are open once the server's lines reach them
                await reopened(server)
                return bool(first.said("ended: deleted by its client") and second.said("ended: deleted by its client"))

            await eventually(everyone_hears, "the server's own diagnostics on both connections")
            await cancel_a_call(first, world, server.errlog, "first")
            await eventually(lambda: first.said(CANCELLED), "the cancel's diagnostic on its connection")
            ended = len(second.said("ended: deleted by its client"))
            await reopened(server)  # a line logged after the cancel's: had that one reached `second`, it came first
            await eventually(lambda: len(second.said("ended: deleted by its client")) > ended, "a later line")
            assert not second.said(CANCELLED), "another connection's call is not this one's business"

    with http_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:
        run(lambda: scenario(server))
        assert server.stop() == 0, server.stderr
        only_diagnostics(server.stderr)
