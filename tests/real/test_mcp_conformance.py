"""`eukhe mcp` against the MCP specification, end to end: MCP logging, and what a client that sends what eukhe does
not serve gets, over stdio and HTTP, each test with a private daemon (the `world` fixture's env).

Waits are bounded polls of real events (a line on stderr, a file a command made, a notification received), never
bare sleeps.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_http import HttpServer, http_server
from tests.real.test_mcp_server import eventually, only_diagnostics, run, workdir

pytestmark = pytest.mark.real

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
