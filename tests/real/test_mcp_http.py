"""`eukhe mcp --http` end to end: the SDK's own streamable HTTP client (`mcp.client.streamable_http`) and plain HTTP
requests against `eukhe mcp --http` as a subprocess, each test with a private daemon (the `world` fixture's env);
then the MCP Inspector's CLI (npm, which nobody here wrote) over stdio and over HTTP.

The server is started on port 0 (or a unix socket) and the test waits for the line that names where it listens.
Waits are bounded polls of real events (that line, a job listed, a process gone), never bare sleeps.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client as SdkClient
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from eukhe.mcp.http import MAX_BODY_BYTES, REQUEST_ARRIVAL_S
from eukhe.mcp.tools import TOOLS, object_schema
from eukhe.procs import alive, group_alive
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import LOOKING, eventually, held_until, only_diagnostics, text_of, workdir

pytestmark = pytest.mark.real

DEADLINE_S = 60.0
INSPECTOR = "@modelcontextprotocol/inspector@0.17.5"
"""The Inspector pinned: the newest whose CLI runs on Debian's Node 20 and sends headers (`--header`); .ci/run puts it
in the npm cache."""
INSPECTOR_DEADLINE_S = 240.0


@dataclass
class HttpServer:
    """One `eukhe mcp --http` process: where it listens, its token, its stderr."""

    process: subprocess.Popen[bytes]
    where: str
    token: str
    errlog: Path

    @property
    def stderr(self) -> str:
        return self.errlog.read_text()

    @property
    def url(self) -> str:
        """The endpoint's URL (a unix socket's through a client with that transport)."""
        return "http://localhost/mcp" if self.where.startswith("unix:") else self.where

    def http(self, **headers: str) -> httpx2.AsyncClient:
        """An HTTP client of this server with these headers (none: no token)."""
        transport = (
            httpx2.AsyncHTTPTransport(uds=self.where[len("unix:") :]) if self.where.startswith("unix:") else None
        )
        return httpx2.AsyncClient(headers=headers, transport=transport, timeout=httpx2.Timeout(30, read=300))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server and wait for its exit code."""
        self.process.send_signal(sig)
        return self.process.wait(timeout=DEADLINE_S)


def listening(errlog: Path, process: subprocess.Popen[bytes]) -> str | None:
    """Where the server says it listens, once it did (fails if it exited first)."""
    found = re.search(r"listening on (\S+)", errlog.read_text())
    if found is None and process.poll() is not None:
        raise AssertionError(f"eukhe mcp --http exited {process.returncode}: {errlog.read_text()}")
    return found.group(1) if found else None


@contextmanager
def http_server(
    world: DaemonEnv, *args: str, address: str = "127.0.0.1:0", structured: bool = True, **env: str
) -> Iterator[HttpServer]:
    """`eukhe mcp --http ADDRESS ARGS` started, once it listens; killed at the end if it still runs. `structured`:
    with `--structured` (the answer records a test checks; the default server sends text only)."""
    errlog = world.root / f"mcp-http-{len(list(world.root.glob('mcp-http-*.err')))}.err"
    with errlog.open("w") as stderr:
        process = world.spawned.add(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "eukhe.cli.main",
                    "mcp",
                    "--http",
                    address,
                    *args,
                    *(["--structured"] if structured else []),
                ],
                env={**world.env, **env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        )
    where = anyio.run(eventually, lambda: listening(errlog, process), "the server to listen", DEADLINE_S)
    token = env.get("EUKHE_MCP_TOKEN") or (world.agent_dir / "mcp-token").read_text().strip()
    try:
        yield HttpServer(process, where, token, errlog)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=DEADLINE_S)


@dataclass
class Client:
    """One client connection, initialized: its session with the server and the eukhe session it drives."""

    session: ClientSession
    init: types.InitializeResult

    @property
    def eukhe_session(self) -> str:
        found = re.search(r"session ([0-9a-f]+)", self.init.instructions or "")
        assert found, self.init.instructions
        return found.group(1)

    async def call(self, tool: str, args: dict[str, Any], **options: Any) -> types.CallToolResult:
        return await self.session.call_tool(tool, args, **options)

    async def text(self, tool: str, args: dict[str, Any]) -> str:
        result = await self.call(tool, args)
        assert not result.is_error, result.content
        return text_of(result)


@asynccontextmanager
async def http_client(server: HttpServer) -> AsyncIterator[Client]:
    """The SDK's streamable HTTP client with the server's token, initialized."""
    async with (
        server.http(Authorization=f"Bearer {server.token}") as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield Client(session, await session.initialize())


def run(scenario: Callable[[], Any]) -> None:
    anyio.run(scenario)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = "application/json, text/event-stream"


# ---------------------------------------------------------------------------------------------------------------------


def test_mcp_http_the_sdks_client_lists_the_tools_runs_a_flood_and_refuses_bad_arguments(world: DaemonEnv) -> None:
    cwd = workdir(world)
    flood = b"".join(b"%d\n" % i for i in range(1, 100_001))

    async def scenario() -> None:
        async with http_client(server) as client:
            listing = await client.session.list_tools()
            assert [tool.name for tool in listing.tools] == list(TOOLS)
            for tool in listing.tools:
                row = TOOLS[tool.name]
                assert tool.input_schema == object_schema(row.args)
                assert tool.output_schema == object_schema(row.answer)
                assert tool.annotations is not None
                assert tool.annotations.read_only_hint is (tool.name in LOOKING), tool.name
            assert client.init.server_info.name == "eukhe"
            assert str(cwd) in (client.init.instructions or "")

            assert await client.text("bash", {"command": "echo hi; exit 3"}) == "hi\n[exit 3]"
            result = await client.call("bash", {"command": "seq 1 100000"})
            output = result.structured_content["output"]
            notice, first, *_ = text_of(result).splitlines()
            assert notice == output["notice"] and "dropped from the start" in notice
            assert output["artifact"] in notice
            assert first == "98001"
            assert (output["lines_kept"], output["lines_dropped"]) == (2000, 98_000)
            assert output["bytes_kept"] + output["bytes_dropped"] == len(flood)
            assert Path(output["artifact"]).read_bytes() == flood

            assert await client.text("ipython", {"code": "x = 6 * 7\nx"}) == "Out: 42"
            assert await client.text("ipython", {"code": "x + 1"}) == "Out: 43"

            unknown = await client.call("bash", {"command": "true", "budgetMs": 5})
            assert unknown.is_error and unknown.structured_content is None
            assert text_of(unknown) == "bad_tool_arguments: bash: unknown field budgetMs (did you mean budget_ms?)"
            missing = await client.call("jobs_wait", {"timeout_ms": 5})
            assert text_of(missing) == "bad_tool_arguments: jobs_wait: missing required field job"
            with pytest.raises(MCPError) as no_tool:
                await client.call("rm_rf", {})
            assert no_tool.value.code == types.INVALID_PARAMS
            assert await client.text("bash", {"command": "echo still serving"}) == "still serving\n[exit 0]"
            session = client.eukhe_session
        sessions = {row["id"]: row for row in world.json("session", "list")["sessions"]}
        assert sessions[session]["cwd"] == str(cwd) and sessions[session]["open"] is True

    with http_server(world, "--cwd", str(cwd)) as server:
        run(scenario)
        assert server.stop() == 0, server.stderr
        only_diagnostics(server.stderr)
        assert server.token not in server.stderr, "the token is never printed"


def test_mcp_http_reports_progress_and_a_cancelled_call_ends_its_whole_process_group(world: DaemonEnv) -> None:
    pids = world.root / "pids"
    command = f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; sleep 301 & echo $! >> {pids}; wait"
    reports: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, message))

    async def scenario() -> None:
        async with http_client(server) as client:
            ticks = "for i in 1 2 3; do echo tick $i; sleep 1; done"
            result = await client.call("bash", {"command": ticks}, progress_callback=on_progress)
            assert text_of(result) == "tick 1\ntick 2\ntick 3\n[exit 0]"
            job = result.structured_content["job"]
            assert len(reports) >= 3, reports
            assert [value for value, _ in reports] == sorted({value for value, _ in reports}), "progress grows"
            assert all((message or "").startswith(f"job {job} running for ") for _, message in reports), reports
            assert any("last: tick" in (message or "") for _, message in reports), reports

            async with anyio.create_task_group() as group:
                scope = anyio.CancelScope()

                async def call() -> None:
                    with scope:
                        await client.call("bash", {"command": command})
                    assert scope.cancelled_caught, "the call ended before it was cancelled"

                group.start_soon(call)
                members = await eventually(
                    lambda: pids.exists() and len(found := pids.read_text().split()) == 3 and found, "the pid file"
                )
                group_id = os.getpgid(int(members[0]))
                scope.cancel()  # the client sends notifications/cancelled
            await eventually(lambda: not group_alive(group_id), "the job's group to end")
            assert not any(alive(int(pid)) for pid in members)
            rows = (await client.call("jobs_list", {})).structured_content["jobs"]
            (cancelled,) = [row for row in rows if row["id"] != job]
            assert (cancelled["status"], cancelled["killed"]) == ("ended", True)
            await eventually(lambda: "cancelled by the client" in server.stderr, "the server's diagnostic")
            assert await client.text("bash", {"command": "echo after"}) == "after\n[exit 0]"

    with http_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:
        run(scenario)


def test_mcp_http_each_connection_has_its_own_session_or_all_attach_to_the_named_one(world: DaemonEnv) -> None:
    cwd = workdir(world)

    async def own_sessions() -> str:
        async with http_client(server) as first, http_client(server) as second:
            assert first.eukhe_session != second.eukhe_session
            await first.text("ipython", {"code": "where = 'first'"})
            await second.text("ipython", {"code": "where = 'second'"})
            assert await first.text("ipython", {"code": "where"}) == "Out: 'first'"
            assert await second.text("ipython", {"code": "where"}) == "Out: 'second'"
            sessions = {row["id"] for row in world.json("session", "list")["sessions"]}
            assert {first.eukhe_session, second.eukhe_session} <= sessions
            return first.eukhe_session

    with http_server(world, "--cwd", str(cwd)) as server:
        named = anyio.run(own_sessions)
        ended = "ended: deleted by its client; the session stays in the daemon"
        anyio.run(eventually, lambda: server.stderr.count(ended) == 2, "both connections to end")
        assert server.stop() == 0

    async def attached() -> None:
        async with http_client(server) as first, http_client(server) as second:
            assert first.eukhe_session == second.eukhe_session == named
            assert await second.text("ipython", {"code": "where"}) == "Out: 'first'", "the named session's kernel"
            detached = await first.call("bash", {"command": "sleep 30", "budget_ms": 0})
            job = detached.structured_content["job"]
            assert f"{job}  bash  running" in await second.text("jobs_list", {})
            await second.call("jobs_cancel", {"job": job})

    with http_server(world, "--session", named) as server:
        assert f"session {named}" in server.stderr
        run(attached)


def test_mcp_http_a_missing_or_wrong_token_is_401_a_bad_origin_403_and_the_token_file_is_kept(world: DaemonEnv) -> None:
    async def door(server: HttpServer) -> None:
        good = {"Authorization": f"Bearer {server.token}", "Accept": ACCEPT}
        async with server.http() as http:
            missing = await http.post(server.url, json=INITIALIZE, headers={"Accept": ACCEPT})
            assert missing.status_code == 401
            assert missing.headers["www-authenticate"].startswith("Bearer")
            assert "no bearer token" in missing.json()["error"]["message"]
            wrong = await http.post(server.url, json=INITIALIZE, headers={**good, "Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
            basic = await http.post(server.url, json=INITIALIZE, headers={**good, "Authorization": "Basic eDp5"})
            assert basic.status_code == 401
            for origin in ("http://evil.example", "null", "http://localhost.evil.example:8000"):
                rebound = await http.post(server.url, json=INITIALIZE, headers={**good, "Origin": origin})
                assert rebound.status_code == 403, origin
                assert "Origin" in rebound.json()["error"]["message"]
            no_token_bad_origin = await http.post(
                server.url, json=INITIALIZE, headers={"Origin": "http://evil.example"}
            )
            assert no_token_bad_origin.status_code == 403, "the Origin is judged first"

            local = await http.post(server.url, json=INITIALIZE, headers={**good, "Origin": "http://localhost:6274"})
            assert local.status_code == 200, local.text
            session_id = local.headers["mcp-session-id"]
            gone = await http.post(
                server.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={**good, "Mcp-Session-Id": "x"}
            )
            assert gone.status_code == 404
            assert (await http.get(server.url, headers=good)).status_code == 400, "a GET needs a session"
            no_init = await http.post(server.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=good)
            assert no_init.status_code == 400 and "initialize" in no_init.json()["error"]["message"]
            assert (await http.put(server.url, headers=good)).status_code == 405
            assert (await http.post(server.url.replace("/mcp", "/other"), headers=good)).status_code == 404
            deleted = await http.delete(server.url, headers={**good, "Mcp-Session-Id": session_id})
            assert deleted.status_code in (200, 204)
            after = await http.delete(server.url, headers={**good, "Mcp-Session-Id": session_id})
            assert after.status_code == 404, "a deleted connection is gone"

    token_file = world.agent_dir / "mcp-token"
    with http_server(world, "--cwd", str(workdir(world))) as server:
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert f"bearer token in {token_file}" in server.stderr
        run(lambda: door(server))
        first_token = server.token
        assert server.stop() == 0
        assert first_token not in server.stderr
    with http_server(world, "--cwd", str(workdir(world))) as again:
        assert again.token == first_token, "the token file is kept across runs"

        async def old_token_works() -> None:
            async with http_client(again) as client:
                assert await client.text("bash", {"command": "echo kept"}) == "kept\n[exit 0]"

        run(old_token_works)

    with http_server(world, "--cwd", str(workdir(world)), EUKHE_MCP_TOKEN="from-the-environment") as chosen:
        assert "bearer token from EUKHE_MCP_TOKEN" in chosen.stderr
        assert "from-the-environment" not in chosen.stderr

        async def env_token() -> None:
            async with chosen.http() as http:
                headers = {"Accept": ACCEPT, "Authorization": f"Bearer {first_token}"}
                assert (await http.post(chosen.url, json=INITIALIZE, headers=headers)).status_code == 401
            async with http_client(chosen) as client:
                assert await client.text("bash", {"command": "echo env"}) == "env\n[exit 0]"
            async with (
                chosen.http(Authorization="Bearer from-the-environment") as http,
                SdkClient(streamable_http_client(chosen.url, http_client=http)) as auto,
            ):  # the SDK's Client speaks the 2026-07-28 era (server/discover first)
                assert text_of(await auto.call_tool("bash", {"command": "echo auto"})) == "auto\n[exit 0]"

        run(env_token)


def test_mcp_http_the_token_in_the_environment_reaches_no_daemon_job_or_kernel(world: DaemonEnv) -> None:
    """`eukhe mcp --http` given EUKHE_MCP_TOKEN starts the daemon: neither it nor a confined job or cell holds it."""
    token = "tok-" + secrets.token_hex(8)
    assert world.daemon_pid() is None  # the server below starts the daemon

    async def scenario() -> None:
        async with http_client(server) as client:
            shown = await client.text("bash", {"command": "env; cat /proc/$PPID/environ | tr '\\0' '\\n'"})
            assert "PATH=" in shown and token not in shown and "EUKHE_MCP_TOKEN" not in shown, shown
            cell = await client.text("ipython", {"code": "import os\nsorted(os.environ)"})
            assert "PATH" in cell and "EUKHE_MCP_TOKEN" not in cell, cell

    with http_server(world, "--cwd", str(workdir(world)), EUKHE_MCP_TOKEN=token) as server:
        run(scenario)
        daemon = world.daemon_pid()
        assert daemon is not None
        assert token.encode() not in Path(f"/proc/{daemon}/environ").read_bytes()


DEEP = 100_000
MALFORMED_BODIES = {
    "a list nested 100,000 deep": b"[" * DEEP + b"]" * DEEP,
    "an object nested 100,000 deep": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "invalid UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"initialize\xff"}',
    "a 100,000-digit id": b'{"jsonrpc":"2.0","id":' + b"9" * DEEP + b',"method":"initialize"}',
    "an empty body": b"",
    "bad syntax": b'{"jsonrpc": "2.0",',
}


def test_mcp_http_a_malformed_body_is_a_parse_error_an_oversized_one_413_and_the_server_serves_on(
    world: DaemonEnv,
) -> None:
    async def scenario(server: HttpServer) -> None:
        good = {"Authorization": f"Bearer {server.token}", "Accept": ACCEPT, "Content-Type": "application/json"}
        async with server.http() as http:
            opened = await http.post(server.url, json=INITIALIZE, headers=good)
            assert opened.status_code == 200, opened.text
            session = {**good, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            for name, body in MALFORMED_BODIES.items():
                for headers in (good, session):  # judged at the door, and by the SDK's transport
                    answer = await http.post(server.url, content=body, headers=headers)
                    assert answer.status_code == 400, (name, answer.status_code, answer.text)
                    error = answer.json()
                    assert error["id"] is None and error["error"]["code"] == types.PARSE_ERROR, (name, error)
                    assert error["error"]["message"].startswith("Parse error"), (name, error)

            status, answer = await anyio.to_thread.run_sync(lambda: declared_too_long(server, good))
            assert status == 413, answer
            refusal = json.loads(answer)
            assert refusal["error"]["message"] == f"the request body is over {MAX_BODY_BYTES} bytes (64 MiB)"
            assert refusal["error"]["code"] == types.INVALID_REQUEST

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
                for _ in range(MAX_BODY_BYTES // (1 << 20) + 1):
                    yield b" " * (1 << 20)

            streamed = await http.post(server.url, content=chunks(), headers=session)
            assert streamed.status_code == 413, streamed.text
            assert streamed.json()["error"]["code"] == types.INVALID_REQUEST

        async with http_client(server) as client:
            assert await client.text("bash", {"command": "echo serving"}) == "serving\n[exit 0]"

    with http_server(world, "--cwd", str(workdir(world))) as server:
        run(lambda: scenario(server))
        assert "Traceback" not in server.stderr and "Exception" not in server.stderr, server.stderr
        assert server.stop() == 0, server.stderr
        only_diagnostics(server.stderr)


def declared_too_long(server: HttpServer, headers: dict[str, str]) -> tuple[int, bytes]:
    """The status and body of the answer to a POST whose Content-Length is over the bound, sent with its headers
    only (the server answers before any of the body)."""
    host, port = re.fullmatch(r"http://([^:/]+):(\d+)/mcp", server.where).groups()  # type: ignore[union-attr]
    connection = http.client.HTTPConnection(host, int(port), timeout=DEADLINE_S)
    try:
        connection.putrequest("POST", "/mcp")
        for name, value in {**headers, "Content-Length": str(MAX_BODY_BYTES + 1)}.items():
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def closed_by_the_server(sock: socket.socket, deadline_s: float) -> bytes:
    """Everything the server sends on `sock` until it closes it (fails past the deadline)."""
    sock.settimeout(deadline_s)
    received = b""
    while chunk := sock.recv(1 << 16):
        received += chunk
    return received


def test_mcp_http_a_request_that_does_not_arrive_whole_in_time_has_its_connection_closed(world: DaemonEnv) -> None:
    deadline_s = REQUEST_ARRIVAL_S + DEADLINE_S

    with http_server(world, "--cwd", str(workdir(world))) as server:
        host, port = re.fullmatch(r"http://([^:/]+):(\d+)/mcp", server.where).groups()  # type: ignore[union-attr]
        authorization = f"Authorization: Bearer {server.token}\r\n".encode()
        stalled = {
            "headers": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            "body": b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + authorization + b"Content-Type: application/json\r\n"
            b"Accept: " + ACCEPT.encode() + b'\r\nContent-Length: 100\r\n\r\n{"jsonrpc"',
            "nothing": b"",
        }
        sockets = {name: socket.create_connection((host, int(port))) for name in stalled}
        try:
            for name, sent in stalled.items():
                sockets[name].sendall(sent)

            async def served_meanwhile() -> None:  # the stalled connections hold nothing a client needs
                async with http_client(server) as client:
                    assert await client.text("bash", {"command": "echo meanwhile"}) == "meanwhile\n[exit 0]"

            run(served_meanwhile)
            answers = {name: closed_by_the_server(sock, deadline_s) for name, sock in sockets.items()}
        finally:
            for sock in sockets.values():
                sock.close()
        assert answers["headers"].startswith(b"HTTP/1.1 408 "), answers
        assert b'"code":-32600' in answers["headers"] and b"did not arrive whole" in answers["headers"], answers
        assert answers["body"] == b"", "the body's request was being read: it is closed, not answered"
        assert answers["nothing"].startswith(b"HTTP/1.1 408 "), answers
        assert "did not arrive whole within" in server.stderr
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr


def test_mcp_http_refuses_a_non_loopback_bind_unless_allow_remote(world: DaemonEnv) -> None:
    for address in ("0.0.0.0:0", "[::]:0", "192.0.2.1:8000", "example.com:80"):
        refused = world.cli("mcp", "--http", address)
        assert refused.returncode == 2, (address, refused.stderr)
        assert "is not a loopback address" in refused.stderr and "--allow-remote" in refused.stderr, refused.stderr
    malformed = world.cli("mcp", "--http", "8000")
    assert malformed.returncode == 2 and "expected HOST:PORT" in malformed.stderr
    stray = world.cli("mcp", "--allow-remote")
    assert stray.returncode == 2 and "--allow-remote goes with --http" in stray.stderr
    assert not world.socket.exists(), "a refused bind starts nothing, not even the daemon"


def test_mcp_http_on_a_unix_socket_0600_and_sigterm_leaves_the_call_in_flight_to_the_daemon(world: DaemonEnv) -> None:
    path = world.root / "mcp.sock"

    go = workdir(world) / "go"
    command = held_until(go)  # runs on until the server stopped

    async def scenario() -> None:
        async with http_client(server) as client:
            assert await client.text("bash", {"command": "echo over a socket"}) == "over a socket\n[exit 0]"
            session = client.eukhe_session
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    with contextlib.suppress(Exception):  # the connection ends under the call
                        await client.call("bash", {"command": command})

                group.start_soon(call)

                def running() -> Any:
                    jobs = world.json("jobs", "list", "--session", session)["jobs"]
                    return [job["id"] for job in jobs if job["status"] == "running"]

                (job,) = await eventually(running, "the job to run")
                assert await anyio.to_thread.run_sync(server.stop) == 0, server.stderr
                group.cancel_scope.cancel()
        assert running() == [job], "the call's job outlives the server"
        go.touch()
        waited = world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "20000")
        assert (waited["status"], waited["exit_code"]) == ("settled", 0), "a shutdown is not a cancel"
        assert waited["output"]["text"] == "start\ndone\n"

    with http_server(world, "--cwd", str(workdir(world)), address=f"unix:{path}") as server:
        assert server.where == f"unix:{path}"
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600, "only this user may connect"
        run(scenario)
        assert not path.exists(), "the socket goes with the server"
        assert "SIGTERM: stopping" in server.stderr
        only_diagnostics(server.stderr)
        assert ": ERROR " not in server.stderr, "the signal closed the connections before uvicorn stopped"


# ---- the MCP Inspector's CLI ----------------------------------------------------------------------------------------


def inspector(world: DaemonEnv, *args: str) -> Any:
    """`npx INSPECTOR --cli ARGS`: its JSON answer (npm's cache is the user's, where .ci/run put the Inspector)."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (Debian: nodejs npm)")
    cache = os.environ.get("npm_config_cache") or str(Path.home() / ".npm")  # noqa: SIM112  (npm spells it so)
    env = {**world.env, "npm_config_cache": cache, "npm_config_prefer_offline": "true"}
    env["npm_config_update_notifier"] = "false"
    done = subprocess.run(
        [npx, "-y", INSPECTOR, "--cli", *args],
        env=env,
        cwd=workdir(world),
        capture_output=True,
        text=True,
        timeout=INSPECTOR_DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def inspector_checks(world: DaemonEnv, *target: str) -> None:
    """The Inspector lists the tools and calls bash."""
    listed = inspector(world, *target, "--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == list(TOOLS)
    called = inspector(world, *target, "--method", "tools/call", "--tool-name", "bash", "--tool-arg", "command=echo hi")
    assert called["content"] == [{"type": "text", "text": "hi\n[exit 0]"}], called
    assert "structuredContent" not in called, "the default server sends the text alone"


def test_the_mcp_inspector_cli_lists_the_tools_and_calls_bash_over_stdio(world: DaemonEnv) -> None:
    inspector_checks(world, sys.executable, "-m", "eukhe.cli.main", "mcp", "--cwd", str(workdir(world)))


def test_the_mcp_inspector_cli_lists_the_tools_and_calls_bash_over_http(world: DaemonEnv) -> None:
    with http_server(world, "--cwd", str(workdir(world)), structured=False) as server:
        target = (server.url, "--transport", "http", "--header", f"Authorization: Bearer {server.token}")
        inspector_checks(world, *target)
        assert "connection 2 (session" in server.stderr, "each Inspector run was a connection of its own"
