"""Prompt children under the daemon, from the CLI and from MCP, against a scripted Chat Completions server: a daemon
started before the key was set gets it from the client that asks for the spawn; the parent sees `message_parent`
while the child runs; the report carries the answer and the usage; the key is nowhere in the agent dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eukhe.children.roster import PROMPT_RESUMES
from eukhe.records.children import ChildRow, Reports, Roster
from tests.chat_server import HOLD, ChatServer, Scripted, chat_server, reply, turns
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import mcp_server, run, text_of
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

KEY = "sk-daemon-Pq77-never-stored"
KEY_ENV = "EUKHE_TEST_MODEL_KEY"


def typed(kind: Any, value: Any) -> Any:
    return msgspec.convert(value, type=kind)


def tree_and_model(world: DaemonEnv, server: ChatServer) -> Path:
    need_tools("git")
    path = world.root / "tree"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "a.txt").write_text("a\n")
    world.agent_dir.mkdir(exist_ok=True)
    model = {"base_url": server.url, "name": "scripted", "api_key_env": KEY_ENV, "backoff_ms": 1}
    (world.agent_dir / "settings.json").write_text(json.dumps({"model": model}))
    return path


def kill_worker_of(world: DaemonEnv, session: str, killed: set[int]) -> None:
    """Kill the live worker of `session` (waiting, bounded, until the daemon lists one not killed before)."""
    deadline = time.monotonic() + 60
    while True:
        workers = world.json("daemon", "status")["workers"]
        live = [w["pid"] for w in workers if w["session"] == session and w["pid"] not in killed]
        if live:
            break
        assert time.monotonic() < deadline, "the child's worker"
        time.sleep(0.05)
    (pid,) = live
    os.kill(pid, signal.SIGKILL)
    killed.add(pid)


def no_key_under(*roots: Path) -> None:
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert KEY.encode() not in path.read_bytes(), path


def test_a_prompt_child_from_the_cli_gets_its_key_from_the_client_and_talks_to_its_parent(world: DaemonEnv) -> None:
    go = threading.Event()

    def script(body: Any, number: int) -> Scripted | object:
        if number == 1:
            return reply(None, ("message_parent", {"text": "hello parent"}), ("bash", {"command": "echo hi > c.txt"}))
        go.wait(30)
        return reply(None, ("answer", {"value": "done"}))

    with chat_server(script) as server:
        tree = tree_and_model(world, server)
        session = world.json("session", "create", "--cwd", str(tree))["id"]  # the daemon starts without the key
        exit_code, refused = world.json_error("spawn", "--session", session, "--name", "keyless", "--prompt", "go")
        assert (exit_code != 0, refused["error"]) == (True, "model_not_configured")
        assert KEY_ENV in refused["message"]
        world.env[KEY_ENV] = KEY  # set in the asking shell only
        row = typed(
            ChildRow,
            world.json("spawn", "--session", session, "--name", "thinker", "--isolated", "--prompt", "say hi"),
        )
        assert row.status == "running"
        rows: list[Any] = []
        for _ in range(300):
            roster = typed(Roster, world.json("children", "list", "--session", session))
            rows = roster.children
            if rows[0].messages:
                break
            go.wait(0.1)
        assert (rows[0].status, rows[0].messages) == ("running", ["hello parent"])
        go.set()
        reports = typed(Reports, world.json("children", "collect", "--session", session, "--timeout-ms", "30000"))
        (report,) = reports.reports
        assert (report.status, report.answer, report.messages) == ("answered", "done", ["hello parent"])
        assert report.usage is not None
        assert (report.usage.model_calls, report.usage.tool_calls, report.usage.total_tokens) == (2, 3, 30)
        assert (tree / "c.txt").read_text() == "hi\n"  # handed back
        text = world.cli("children", "collect", "--session", session)
        assert "message: hello parent" in text.stdout
        assert "usage: 30 tokens" in text.stdout
        shown = world.json("session", "show", report.session)
        assert "assistant" in json.dumps(shown)
        assert {seen.headers.get("Authorization") for seen in server.requests} == {f"Bearer {KEY}"}
    world.stop()
    no_key_under(world.agent_dir, tree)


def test_a_prompt_child_whose_worker_dies_mid_loop_resumes_from_its_journal(world: DaemonEnv) -> None:
    script = turns(reply(None, ("bash", {"command": "echo once >> ran.txt"})), HOLD, reply("resumed"))
    with chat_server(script) as server:
        tree = tree_and_model(world, server)
        world.env[KEY_ENV] = KEY
        session = world.json("session", "create", "--cwd", str(tree))["id"]
        row = typed(ChildRow, world.json("spawn", "--session", session, "--name", "cut", "--prompt", "go"))
        assert server.holding.wait(60), "the child's second request"
        kill_worker_of(world, row.session, set())
        reports = typed(Reports, world.json("children", "collect", "--session", session, "--timeout-ms", "60000"))
        (report,) = reports.reports
        assert (report.status, report.answer) == ("answered", "resumed"), report
        assert report.usage is not None
        assert (report.usage.model_calls, report.usage.tool_calls) == (2, 1)  # the held request gave no reply
        second, third = (seen.body for seen in server.requests[1:])
        assert third["messages"][1:] == second["messages"][1:]  # the conversation taken up from the journal
        intro = second["messages"][0]["content"].split("Working directory:")[0]  # (the jobs section may differ)
        assert third["messages"][0]["content"].startswith(intro)
        assert [m["role"] for m in third["messages"]] == ["system", "user", "assistant", "tool"]
        assert (tree / "ran.txt").read_text() == "once\n"  # its call ran once: the resume read its result
        calls = world.json("session", "calls", report.session)
        assert [call["tool"] for call in calls["calls"]] == ["bash"]


def test_a_prompt_child_whose_worker_keeps_dying_ends_interrupted_with_its_transcript(world: DaemonEnv) -> None:
    with chat_server(turns(reply(None, ("bash", {"command": "true"})), HOLD)) as server:
        tree = tree_and_model(world, server)
        world.env[KEY_ENV] = KEY
        session = world.json("session", "create", "--cwd", str(tree))["id"]
        row = typed(ChildRow, world.json("spawn", "--session", session, "--name", "cut", "--prompt", "go"))
        killed: set[int] = set()
        for held in range(PROMPT_RESUMES + 1):
            deadline = time.monotonic() + 60
            while len(server.requests) < held + 2:  # each life of the worker asks again, and is held
                assert time.monotonic() < deadline, "the child's next request"
                time.sleep(0.01)
            kill_worker_of(world, row.session, killed)
        reports = typed(Reports, world.json("children", "collect", "--session", session, "--timeout-ms", "60000"))
        (report,) = reports.reports
        assert report.status == "interrupted", report
        assert report.error is not None
        assert report.error.reason == "interrupted"
        calls = world.json("session", "calls", report.session)
        assert [call["tool"] for call in calls["calls"]] == ["bash"]  # its transcript stays in its session


def test_mcp_spawn_with_a_prompt_passes_the_servers_key_and_collect_reports_the_answer_and_usage(
    world: DaemonEnv,
) -> None:
    with chat_server(
        turns(reply(None, ("write", {"path": "m.txt", "content": "by mcp\n"})), reply("written"))
    ) as server:
        tree = tree_and_model(world, server)
        world.json("session", "create", "--cwd", str(tree))  # the daemon starts without the key
        world.env[KEY_ENV] = KEY  # the MCP server's environment has it

        async def scenario() -> None:
            async with mcp_server(world, "--cwd", str(tree)) as mcp:
                started = await mcp.call("spawn", {"name": "helper", "prompt": "write m.txt"})
                assert not started.is_error, text_of(started)
                collected = await mcp.call("collect", {"names": ["helper"], "timeout_ms": 30_000})
                assert not collected.is_error, text_of(collected)
                report = collected.structured_content["reports"][0]
                assert (report["status"], report["answer"]) == ("answered", "written")
                assert report["usage"]["model_calls"] == 2
                shown = text_of(collected)
                assert "helper: answered" in shown
                assert "usage: 30 tokens (20 prompt, 10 completion), 2 model calls, 1 tool call" in shown

        run(scenario)
        assert (tree / "m.txt").read_text() == "by mcp\n"
        assert {seen.headers.get("Authorization") for seen in server.requests} == {f"Bearer {KEY}"}
    world.stop()
    no_key_under(world.agent_dir, tree)
