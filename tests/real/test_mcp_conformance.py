"""`eukhe mcp` against the MCP specification, end to end: the official conformance runner's server scenarios over
HTTP; MCP logging; the 2026-07-28 era over HTTP beside the initialize one; what a client that sends what eukhe does
not serve gets, in both eras, over stdio and HTTP; a stream's priming event and its resumption. Each test has a
private daemon (the `world` fixture's env).

The conformance runner (npm, pinned in tests/npm, run by the pinned Node) sends no headers of its own, and eukhe
refuses a request without its bearer token: the runner talks to a small reverse proxy here (`BearerProxy`) that adds
the token to each request and relays each answer as it streams. The proxy adds nothing else and takes nothing away
(every other header, the body, the status, every SSE byte as it comes), so what the runner judges is eukhe's.

Waits are bounded polls of real events (a line on stderr, a file a command made, a notification received), never
bare sleeps.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest
import uvicorn
import yaml
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client.client import Client as SdkClient
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import NAME_BEARING_METHODS
from starlette.types import Receive, Scope, Send

from eukhe.mcp.http import RETRY_MS
from eukhe.mcp.stdio import MAX_LINE_BYTES
from eukhe.procs import group_alive
from tests.npm_tools import need_npm_tool
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_http import HttpServer, http_client, http_server
from tests.real.test_mcp_server import DEADLINE_S, eventually, only_diagnostics, run, text_of, workdir

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


async def cancelled(call: Callable[[], Awaitable[Any]], running: Callable[[], Any], what: str) -> Any:
    """Start `call`, and cancel it once `running` holds (its value): the client cancels the request it sent."""
    async with anyio.create_task_group() as group:
        scope = anyio.CancelScope()

        async def cancellable() -> None:
            with scope:
                await call()

        group.start_soon(cancellable)
        found = await eventually(running, what)
        scope.cancel()
    return found


async def cancel_a_call(peer: Peer, world: DaemonEnv, stderr: Path, name: str) -> None:
    """Start a bash call, cancel it once its command runs, and wait for the server's diagnostic of that cancel."""
    started, go = world.root / f"{name}.started", world.root / f"{name}.go"
    before = stderr.read_text().count(CANCELLED)
    command = f"touch {started}; while [ ! -e {go} ]; do sleep 0.01; done"
    await cancelled(lambda: peer.session.call_tool("bash", {"command": command}), started.exists, f"{name} to run")
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
        ran = {re.sub(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$", r"\1", path.name) for path in results.iterdir()}
        assert ran == set(scenarios), f"every scenario ran: {sorted(set(scenarios) ^ ran)}\n{output}"
        assert done.returncode == 0, f"a scenario outside the baseline failed, or one in it passed:\n{output}"
        assert "Baseline check passed" in output, output
        assert "Traceback" not in server.stderr, server.stderr
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
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
    refused = "refused POST /mcp: wrong_token"

    async def a_refused_request(server: HttpServer) -> None:
        """A request with a wrong token: the server logs its refusal, outside every connection's requests."""
        async with server.http(Authorization="Bearer wrong") as http:
            assert (await http.post(server.url, json={}, headers={"Accept": ACCEPT})).status_code == 401

    async def scenario(server: HttpServer) -> None:
        async with http_peer(server) as first, http_peer(server) as second:
            assert first.init.capabilities.logging is not None
            await first.set_level("info")
            await second.set_level("info")

            async def everyone_hears() -> bool:  # their GET streams are open once the server's lines reach them
                await a_refused_request(server)
                return bool(first.said(refused) and second.said(refused))

            await eventually(everyone_hears, "the server's own diagnostics on both connections")
            await cancel_a_call(first, world, server.errlog, "first")
            await eventually(lambda: first.said(CANCELLED), "the cancel's diagnostic on its connection")
            heard = len(second.said(refused))
            await a_refused_request(server)  # a line after the cancel's: had that one reached `second`, it came first
            await eventually(lambda: len(second.said(refused)) > heard, "a later line")
            assert not second.said(CANCELLED), "another connection's call is not this one's business"

    with http_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:
        run(lambda: scenario(server))
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
        only_diagnostics(server.stderr)


# ---- the two eras ---------------------------------------------------------------------------------------------------

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
"""What every request of the 2026-07-28 era carries in its `_meta`."""
ACCEPT = "application/json, text/event-stream"


def request(request_id: int, method: str, params: dict[str, Any] | None = None, *, era: str) -> dict[str, Any]:
    """A JSON-RPC request of `era` (one of 2026-07-28 carries its envelope)."""
    params = dict(params or {})
    if era == MODERN:
        params["_meta"] = {**ENVELOPE, **params.get("_meta", {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}


def modern_headers(server: HttpServer, message: dict[str, Any]) -> dict[str, str]:
    """The headers of a 2026-07-28 request: the token, the version, the method, and the name it acts on."""
    headers = {
        "Authorization": f"Bearer {server.token}",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": message["method"],
    }
    name = (message.get("params") or {}).get(NAME_BEARING_METHODS.get(message["method"], ""))
    return headers | ({"Mcp-Name": name} if isinstance(name, str) else {})


async def post(http: httpx2.AsyncClient, url: str, headers: dict[str, str], message: dict[str, Any]) -> tuple[int, Any]:
    """POST one JSON-RPC message; the status and its answer (read from JSON, or from the SSE stream's events)."""
    answer = await http.post(url, json=message, headers=headers)
    if not answer.content:
        return answer.status_code, None
    if answer.headers["content-type"].startswith("text/event-stream"):
        events = [
            json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:") and line[5:].strip()
        ]
        (found,) = [event for event in events if event.get("id") == message.get("id")]
        return answer.status_code, found
    return answer.status_code, answer.json()


@asynccontextmanager
async def modern_client(server: HttpServer) -> AsyncIterator[SdkClient]:
    """The SDK's `Client` over streamable HTTP: it asks `server/discover` first, and speaks 2026-07-28 when served."""
    async with (
        server.http(Authorization=f"Bearer {server.token}") as http,
        SdkClient(streamable_http_client(server.url, http_client=http)) as client,
    ):
        assert client.session.protocol_version == MODERN
        yield client


async def text(client: SdkClient, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return text_of(result)


def test_mcp_http_serves_the_2026_07_28_era_beside_the_initialize_one(world: DaemonEnv) -> None:
    pids = world.root / "pids"
    reports: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(message or "")

    async def scenario(server: HttpServer) -> str:
        discover = request(1, "server/discover", era=MODERN)
        async with server.http() as http:
            status, discovered = await post(http, server.url, modern_headers(server, discover), discover)
        assert status == 200, discovered
        result = discovered["result"]
        assert MODERN in result["supportedVersions"] and "tools" in result["capabilities"], result
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "eukhe"
        session = re.search(r"session ([0-9a-f]+)", result["instructions"]).group(1)  # type: ignore[union-attr]

        async with modern_client(server) as modern, modern_client(server) as other, http_client(server) as legacy:
            assert legacy.init.protocol_version == HANDSHAKE, "the initialize era as before"
            assert legacy.eukhe_session != session
            assert await text(modern, "bash", {"command": "echo modern"}) == "modern\n[exit 0]"
            await text(modern, "ipython", {"code": "x = 41"})
            assert await text(other, "ipython", {"code": "x + 1"}) == "Out: 42", "one session for every request"
            assert "NameError" in text_of(await legacy.call("ipython", {"code": "x"})), "a connection's own session"

            ticks = "for i in 1 2 3; do echo tick $i; sleep 0.5; done"
            done = await modern.call_tool("bash", {"command": ticks}, progress_callback=on_progress)
            assert text_of(done) == "tick 1\ntick 2\ntick 3\n[exit 0]"
            assert any("last: tick" in message for message in reports), reports

            command = f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; wait"

            def job_group() -> int | None:  # read while the job runs: its process group
                found = pids.read_text().split() if pids.exists() else []
                return os.getpgid(int(found[0])) if len(found) == 2 else None

            group_id = await cancelled(  # the client closes the call's stream: that era's cancel
                lambda: modern.call_tool("bash", {"command": command}), job_group, "the job to run"
            )
            await eventually(lambda: not group_alive(group_id), "the cancelled job's group to end")
            await eventually(lambda: CANCELLED in server.stderr, "the server's diagnostic")
            assert await legacy.text("bash", {"command": "echo legacy"}) == "legacy\n[exit 0]"
        return session

    with http_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:
        session = anyio.run(scenario, server)
        assert f"the 2026-07-28 requests (session {session})" in server.stderr
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
        only_diagnostics(server.stderr)

    async def attached(server: HttpServer) -> None:
        async with modern_client(server) as modern:
            assert await text(modern, "ipython", {"code": "x"}) == "Out: 41", "the named session's kernel"

    with http_server(world, "--session", session) as server:
        run(lambda: attached(server))


# ---- bad input ------------------------------------------------------------------------------------------------------

COMPLETE = {
    "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
    "argument": {"name": "a", "value": "b"},
}
BAD_REQUESTS: list[tuple[str, dict[str, Any], dict[str, int]]] = [
    ("eukhe/no-such-method", {}, {HANDSHAKE: types.METHOD_NOT_FOUND, MODERN: types.METHOD_NOT_FOUND}),
    ("prompts/list", {}, {HANDSHAKE: types.METHOD_NOT_FOUND, MODERN: types.METHOD_NOT_FOUND}),
    (
        "prompts/get",
        {"name": "test_simple_prompt"},
        {HANDSHAKE: types.METHOD_NOT_FOUND, MODERN: types.METHOD_NOT_FOUND},
    ),
    ("completion/complete", COMPLETE, {HANDSHAKE: types.METHOD_NOT_FOUND, MODERN: types.METHOD_NOT_FOUND}),
    ("resources/templates/list", {}, {HANDSHAKE: types.METHOD_NOT_FOUND, MODERN: types.METHOD_NOT_FOUND}),
    (
        "resources/subscribe",
        {"uri": "eukhe://session/calls"},
        {HANDSHAKE: types.METHOD_NOT_FOUND, MODERN: types.METHOD_NOT_FOUND},
    ),
    ("tools/call", {"name": "rm_rf", "arguments": {}}, {HANDSHAKE: types.INVALID_PARAMS, MODERN: types.INVALID_PARAMS}),
    ("resources/read", {"uri": "test://static-text"}, {HANDSHAKE: types.INVALID_PARAMS, MODERN: types.INVALID_PARAMS}),
    ("logging/setLevel", {"level": "loud"}, {HANDSHAKE: types.INVALID_PARAMS, MODERN: types.METHOD_NOT_FOUND}),
]
"""What eukhe does not serve, and the JSON-RPC error each era's client gets: a method it has no handler for (a
capability it does not declare: prompts, completions, resource templates and subscriptions) is -32601; an unknown
tool or resource, or a bad parameter, -32602. The 2026-07-28 era has no `logging/setLevel` at all."""
UNKNOWN_NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/eukhe-no-such-thing", "params": {}}
"""A notification eukhe does not know: dropped, with no answer (JSON-RPC answers no notification)."""
STILL_SERVING = ("tools/call", {"name": "bash", "arguments": {"command": "echo still serving"}})


def still_serving(answer: dict[str, Any]) -> None:
    """The answer to STILL_SERVING: the call ran."""
    assert answer["result"]["content"][0]["text"] == "still serving\n[exit 0]", answer


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
def test_mcp_http_a_request_eukhe_does_not_serve_gets_its_json_rpc_error_and_the_session_goes_on(
    world: DaemonEnv, era: str
) -> None:
    async def scenario(server: HttpServer) -> None:
        async with server.http() as http:
            if era == HANDSHAKE:
                headers = {"Authorization": f"Bearer {server.token}", "Accept": ACCEPT}
                opening = {
                    "protocolVersion": HANDSHAKE,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                }
                opened = await http.post(server.url, json=request(0, "initialize", opening, era=era), headers=headers)
                assert opened.status_code == 200, opened.text
                headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": HANDSHAKE}
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                assert (await http.post(server.url, json=initialized, headers=headers)).status_code == 202

            def headers_of(message: dict[str, Any]) -> dict[str, str]:
                return headers if era == HANDSHAKE else modern_headers(server, message)

            for number, (method, params, codes) in enumerate(BAD_REQUESTS, start=1):
                message = request(number, method, params, era=era)
                status, answer = await post(http, server.url, headers_of(message), message)
                assert answer["id"] == number and answer["error"]["code"] == codes[era], (method, status, answer)
                if era == MODERN:  # that era's transport says it in the HTTP status too
                    assert status == (404 if codes[era] == types.METHOD_NOT_FOUND else 400), (method, status)
            status, nothing = await post(http, server.url, headers_of(UNKNOWN_NOTIFICATION), UNKNOWN_NOTIFICATION)
            assert (status, nothing) == (202, None)
            method, params = STILL_SERVING
            message = request(len(BAD_REQUESTS) + 1, method, params, era=era)
            status, answer = await post(http, server.url, headers_of(message), message)
            assert status == 200
            still_serving(answer)

    with http_server(world, "--cwd", str(workdir(world))) as server:
        run(lambda: scenario(server))
        assert "Traceback" not in server.stderr, server.stderr
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
        only_diagnostics(server.stderr)


class Wire:
    """`eukhe mcp` as a subprocess, spoken to in JSON lines on its stdin and stdout."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send(json.dumps(message).encode() + b"\n")

    async def answer(self, request_id: int | None) -> dict[str, Any]:
        """The next answer, which must be to request `request_id` (the notifications before it passed over)."""
        with anyio.fail_after(60):
            while True:
                line = json.loads(await self.stdout.receive_until(b"\n", 64 << 20))
                if "id" in line and "method" not in line:
                    assert line["id"] == request_id, line
                    return line

    async def ask(self, request_id: int, method: str, params: dict[str, Any], era: str) -> dict[str, Any]:
        await self.send(request(request_id, method, params, era=era))
        return await self.answer(request_id)


@pytest.mark.parametrize("era", [HANDSHAKE, MODERN])
def test_mcp_stdio_a_request_or_a_line_eukhe_does_not_serve_gets_its_json_rpc_error_and_the_session_goes_on(
    world: DaemonEnv, era: str
) -> None:
    errlog = world.root / "mcp.err"

    async def scenario() -> None:
        command = [sys.executable, "-m", "eukhe.cli.main", "mcp", "--cwd", str(workdir(world))]
        with errlog.open("w") as stderr:
            async with await anyio.open_process(command, env=world.env, stderr=stderr) as process:
                wire = Wire(process)
                if era == HANDSHAKE:
                    opening = {
                        "protocolVersion": HANDSHAKE,
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"},
                    }
                    opened = await wire.ask(0, "initialize", opening, era)
                    assert opened["result"]["protocolVersion"] == HANDSHAKE
                    await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                else:
                    discovered = await wire.ask(0, "server/discover", {}, era)
                    assert MODERN in discovered["result"]["supportedVersions"], discovered
                for number, (method, params, codes) in enumerate(BAD_REQUESTS, start=1):
                    answer = await wire.ask(number, method, params, era)
                    assert answer["error"]["code"] == codes[era], (method, answer)
                await wire.send(UNKNOWN_NOTIFICATION)
                for line, code, request_id in UNREADABLE_LINES if era == HANDSHAKE else UNREADABLE_LINES[:-1]:
                    await wire.stdin.send(line)
                    answer = await wire.answer(request_id)
                    assert answer["error"]["code"] == code, (line[:80], answer)
                await wire.stdin.send(b"\n \n")  # blank lines: no messages, no answers
                method, params = STILL_SERVING
                still_serving(await wire.ask(len(BAD_REQUESTS) + 1, method, params, era))
                await wire.stdin.aclose()  # the client leaves: the server ends
                assert await process.wait() == 0

    run(scenario)
    only_diagnostics(errlog.read_text())


UNREADABLE_LINES = [
    (b"not json\n", types.PARSE_ERROR, None),
    (b'{"jsonrpc": "2.0", "id": 41, "method": "tools/list"\n', types.PARSE_ERROR, None),  # cut short
    (b'{"jsonrpc": "2.0", "id": 42}\n', types.INVALID_REQUEST, 42),  # no method: the id is read
    (b'[{"jsonrpc": "2.0", "id": 43, "method": "tools/list"}]\n', types.INVALID_REQUEST, None),  # a batch
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", types.PARSE_ERROR, None),  # nested past the parser's bound
    (b"x" * (MAX_LINE_BYTES + 1) + b"\n", types.INVALID_REQUEST, None),  # past the bound: dropped whole
]
"""Lines that are no message, on stdio, and the JSON-RPC error each gets (with the id it names, when one can be read);
each is answered in turn, and the next line is the next message. (The 64 MiB one is sent in one era only: what it
checks is the transport's, before any era.)"""


# ---- resumability ---------------------------------------------------------------------------------------------------


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, str]]:
    """The SSE events of a stream's lines, each as its fields (`id`, `retry`, `data`, ...), as they come."""
    fields: dict[str, str] = {}
    async for line in lines:
        if line:
            name, _, value = line.partition(":")
            fields[name] = fields.get(name, "") + value.removeprefix(" ")
        elif fields:
            yield fields
            fields = {}


def test_mcp_http_a_calls_stream_is_primed_and_a_client_that_lost_it_resumes_it(world: DaemonEnv) -> None:
    go = workdir(world) / "go"  # in the session's directory: the sandboxed command sees it

    async def scenario(server: HttpServer) -> None:
        headers = {"Authorization": f"Bearer {server.token}", "Accept": ACCEPT}
        async with server.http() as http:
            opening = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
            opened = await http.post(server.url, json=request(0, "initialize", opening, era=HANDSHAKE), headers=headers)
            headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": HANDSHAKE}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(server.url, json=initialized, headers=headers)).status_code == 202
            resume = {**headers, "Accept": "text/event-stream"}

            async def answer_on(events: AsyncIterator[dict[str, str]], request_id: int) -> tuple[str, Any]:
                async for event in events:
                    message = json.loads(event["data"]) if event.get("data") else {}
                    if message.get("id") == request_id:
                        return event["id"], message
                raise AssertionError(f"the stream ended before the answer to {request_id}")

            # A stream that came whole is kept: resumed after its priming event, it gives the answer again.
            call = request(1, "tools/call", {"name": "bash", "arguments": {"command": "echo one"}}, era=HANDSHAKE)
            async with http.stream("POST", server.url, json=call, headers=headers) as answer:
                assert answer.headers["content-type"].startswith("text/event-stream")
                events = sse_events(answer.aiter_lines())
                priming = await anext(events)
                answered, first = await answer_on(events, 1)
            assert priming.get("data", "") == "" and priming["id"] and priming["retry"] == str(RETRY_MS), priming
            async with http.stream("GET", server.url, headers={**resume, "Last-Event-ID": priming["id"]}) as again:
                assert again.status_code == 200
                assert await answer_on(sse_events(again.aiter_lines()), 1) == (answered, first)
            assert first["result"]["content"][0]["text"] == "one\n[exit 0]", first

            # A stream lost mid-call: resumed after its priming event, the answer comes on the new stream.
            command = f"echo before; while [ ! -e {go} ]; do sleep 0.01; done; echo after"
            call = request(2, "tools/call", {"name": "bash", "arguments": {"command": command}}, era=HANDSHAKE)
            async with http.stream("POST", server.url, json=call, headers=headers) as answer:
                priming = await anext(sse_events(answer.aiter_lines()))
            async with http.stream("GET", server.url, headers={**resume, "Last-Event-ID": priming["id"]}) as resumed:
                events = sse_events(resumed.aiter_lines())
                primed_again = await anext(events)  # the stream is the call's again: what it sends comes here
                assert primed_again.get("data", "") == "" and primed_again["id"] != priming["id"], primed_again
                go.touch()
                _, last = await answer_on(events, 2)
            assert last["result"]["content"][0]["text"] == "before\nafter\n[exit 0]", last

    async def bounded(server: HttpServer) -> None:
        with anyio.fail_after(4 * DEADLINE_S):  # a stream that never gives what it should fails the test, not hangs
            await scenario(server)

    with http_server(world, "--cwd", str(workdir(world))) as server:
        run(lambda: bounded(server))
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
        only_diagnostics(server.stderr)
