"""`eukhe mcp` sends its tool calls to the session's worker itself, past the supervisor (docs/daemon-protocol.md,
"Direct calls"): the worker answers its direct clients as the supervisor's, refuses them the supervisor's own
questions, and once idle culling found it idle refuses them everything; a call the worker did not take goes through
the daemon, which reopens the session.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from eukhe.children.family import AgentSession
from eukhe.clock import VirtualClock
from eukhe.daemon.client import DaemonClient
from eukhe.daemon.host import SessionHost
from eukhe.daemon.protocol import Request
from eukhe.daemon.replies import DaemonError
from eukhe.daemon.server import RequestError
from eukhe.records.daemon import CullArgs, SessionArgs, ToolCallArgs
from eukhe.records.sandbox import SandboxChoice
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import eventually, mcp_server, run, workdir
from tests.real.test_upkeep import LONG_S, configure, culled, worker_pids

pytestmark = pytest.mark.real


def test_a_worker_answers_a_direct_client_but_not_with_the_supervisors_questions(world: DaemonEnv) -> None:
    session = world.json("session", "create", "--cwd", str(workdir(world)))["id"]
    with DaemonClient.connect(world.socket) as daemon:
        pong = daemon.call("session.ping", {"session": session})
    assert pong["pid"] == worker_pids(world)[session]
    with DaemonClient.connect(Path(pong["socket"])) as worker:
        answer = worker.call("tool.call", {"session": session, "tool": "bash", "args": {"command": "echo direct"}})
        assert answer["text"].startswith("direct\n"), answer
        with pytest.raises(DaemonError) as refused:
            worker.call("session.cull", {"session": session, "session_idle_ms": 1, "kernel_idle_ms": 0})
        assert refused.value.code == "unknown_op"
    rows = world.json("session", "calls", session)["calls"]
    assert [(row["tool"], row["status"]) for row in rows] == [("bash", "done")]


def test_a_worker_found_idle_refuses_direct_requests_and_still_answers_the_supervisor(tmp_path: Path) -> None:
    os.environ.setdefault("EUKHE_CODING_AGENT_DIR", str(tmp_path / "agent"))

    async def scenario() -> None:
        session = await AgentSession.create(tmp_path, sandbox=SandboxChoice(mode="off"))
        clock = VirtualClock()
        host = SessionHost(session, os.open(tmp_path, os.O_RDONLY), clock=clock)
        call = ToolCallArgs(session=session.id, tool="bash", args={"command": "echo hi"})

        def ask(op: str, args: object) -> Request:
            return Request(id=1, op=op, args=args)

        def no_events(event: object) -> None:
            return None

        try:
            assert (await host.handle_direct(ask("tool.call", call), no_events)).status == "returned"
            asked = CullArgs(session=session.id, session_idle_ms=1, kernel_idle_ms=0)
            clock.advance(5)  # idle for more than its 1 ms
            assert (await host.handle(ask("session.cull", asked), no_events)).idle
            with pytest.raises(RequestError) as refused:
                await host.handle_direct(ask("tool.call", call), no_events)
            assert refused.value.code == "worker_retiring"
            ping = await host.handle(ask("session.ping", SessionArgs(session=session.id)), no_events)
            assert ping.session == session.id  # the supervisor's requests still go through until it stops the worker
        finally:
            await host.close()

    asyncio.run(scenario())


def test_an_mcp_call_after_its_worker_was_culled_reopens_the_session_through_the_daemon(world: DaemonEnv) -> None:
    configure(world, session_idle_timeout_s=LONG_S)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            assert (await server.text("bash", {"command": "echo one"})).startswith("one\n")
            session = server.session
            first = worker_pids(world)[session]
            configure(world, session_idle_timeout_s=0.3)  # the worker the first call reached, and kept a line to
            await eventually(lambda: culled(world, session), "the idle session to be culled")
            configure(world, session_idle_timeout_s=LONG_S)
            assert (await server.text("bash", {"command": "echo two"})).startswith("two\n")
            second = worker_pids(world)[session]
            assert second != first
            assert (await server.text("bash", {"command": "echo three"})).startswith("three\n")
            assert worker_pids(world)[session] == second
        rows = world.json("session", "calls", session)["calls"]
        assert [row["status"] for row in rows] == ["done", "done", "done"]
        log = json.dumps(rows)
        assert "worker_died" not in log and "worker_retiring" not in log

    run(scenario)
