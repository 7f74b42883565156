"""Prompt children against a real, scripted Chat Completions server on 127.0.0.1 (tests/chat_server.py): a model's
loop over the child session's own tool calls, its end (answered, stalled, failed, cancelled, interrupted), its
retries, its usage, its messages to the parent, its hand-back, and its key (sent as a Bearer token, never stored).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eukhe.api import InputError, Session
from eukhe.calls.child_loop import CHILD_TOOLS, TOOL_SPECS
from eukhe.children.errors import ModelNotConfiguredError
from eukhe.mcp.tools import TOOLS
from eukhe.records.workspace import HandbackReport
from tests.chat_server import HOLD, ChatServer, Scripted, chat_server, reply, turns
from tests.real.kernel_support import run, until
from tests.real.test_children import cell
from tests.real.tools import need_tools
from tests.skills_support import write_skill

pytestmark = pytest.mark.real

JOBS = ("jobs_list", "jobs_wait", "jobs_cancel", "jobs_write", "jobs_signal")
KEY = "sk-test-Zq81-never-stored"
KEY_ENV = "EUKHE_TEST_MODEL_KEY"


@dataclass
class World:
    """A test's agent dir (with the user settings' `model`), its work tree and its sessions root."""

    root: Path
    work: Path

    @property
    def agent(self) -> Path:
        return self.root / "agent"

    @property
    def sessions(self) -> Path:
        return self.agent / "sessions"

    def model(self, server: ChatServer, **more: Any) -> None:
        """Point the user settings' `model` at `server` (retries with a tiny backoff, unless `more` says)."""
        model = {"base_url": server.url, "name": "scripted", "api_key_env": KEY_ENV, "backoff_ms": 1, **more}
        (self.agent / "settings.json").write_text(json.dumps({"model": model}))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    need_tools("git")
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "a.txt").write_text("a\n")
    found = World(tmp_path, work)
    found.agent.mkdir()
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(found.agent))
    monkeypatch.setenv(KEY_ENV, KEY)
    return found


@contextlib.asynccontextmanager
async def parent(world: World) -> AsyncIterator[Session]:
    """A parent session in the work tree, closed at the end."""
    session = await Session.create(world.work, root=world.sessions)
    try:
        yield session
    finally:
        await session.close()


async def collect_one(session: Session, name: str) -> Any:
    (report,) = await session.children.collect([name], timeout_ms=30_000)
    return report


def tool_messages(body: Any) -> list[str]:
    """The tool results a request carried back to the model."""
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_tool_calls_run_in_the_workspace_then_an_answer(world: World) -> None:
    with chat_server(
        turns(
            reply(None, ("bash", {"command": "echo made > made.txt && cat a.txt"})),
            reply(None, ("read", {"path": "made.txt"})),
            reply(None, ("answer", {"value": {"done": True}})),
        )
    ) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                row = await session.children.spawn("one", prompt="make a file")
                assert row.status == "running"
                report = await collect_one(session, "one")
                assert report.status == "answered", report
                assert report.answer == {"done": True}
                assert (world.work / "made.txt").read_text() == "made\n"
                child = await Session.open(report.session, root=world.sessions)
                try:
                    kinds = [entry.kind for entry in child.entries()]
                    calls = child.view_state().slots
                finally:
                    await child.close()
                assert kinds[:3] == ["notice", "user", "assistant"], kinds
                assert sorted(slot.tool for slot in calls.values()) == ["answer", "bash", "read"]

        run(scenario())
        first, second, third = (seen.body for seen in server.requests)
        assert first["model"] == "scripted"
        assert [m["role"] for m in first["messages"]] == ["system", "user"]
        system = first["messages"][0]["content"]
        assert str(world.work) in system
        assert "message_parent" in system
        assert first["messages"][1]["content"] == "make a file"
        names = [tool["function"]["name"] for tool in first["tools"]]
        assert names == [*CHILD_TOOLS, "message_parent", "answer"]
        assert ("bash", "ipython", "read", "write", "edit", "grep", "glob", *JOBS) == CHILD_TOOLS
        assert "a\n" in tool_messages(second)[0]  # bash's text, as MCP shows it
        assert "made" in tool_messages(third)[1]


def test_the_childs_tools_are_the_records_and_descriptions_eukhe_mcp_lists() -> None:
    offered = {spec["function"]["name"]: spec["function"] for spec in TOOL_SPECS}
    for name in CHILD_TOOLS:
        listing = TOOLS[name].listing()
        assert offered[name]["description"] == listing.description
        assert offered[name]["parameters"] == listing.input_schema


def test_a_reply_without_a_tool_call_is_the_answer_and_usage_is_summed(world: World) -> None:
    with chat_server(
        turns(
            reply(None, ("bash", {"command": "true"}), ("glob", {"pattern": "*.txt"}), usage=(100, 7)),
            reply("all good", usage=(120, 3)),
        )
    ) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("sum", prompt="look")
                report = await collect_one(session, "sum")
                assert report.status == "answered"
                assert report.answer == "all good"
                usage = report.usage
                assert usage is not None
                assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (220, 10, 230)
                assert (usage.model_calls, usage.tool_calls) == (2, 2)
                (row,) = session.children.list()
                assert row.usage == usage

        run(scenario())


def test_an_isolated_childs_files_are_handed_back(world: World) -> None:
    with chat_server(
        turns(
            reply(None, ("write", {"path": "new.txt", "content": "from the child\n"})),
            reply(None, ("bash", {"command": "echo changed > a.txt"})),
            reply("done"),
        )
    ) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                row = await session.children.spawn("iso", prompt="change things", workspace="isolated")
                assert row.cwd != str(world.work)
                report = await collect_one(session, "iso")
                assert report.status == "answered"
                assert isinstance(report.handback, HandbackReport)
                assert sorted(report.handback.paths_taken) == ["a.txt", "new.txt"]
                assert (world.work / "new.txt").read_text() == "from the child\n"
                assert (world.work / "a.txt").read_text() == "changed\n"

        run(scenario())
        system = server.requests[0].body["messages"][0]["content"]
        assert "workspaces" in system  # the child is told its own working directory: the copy


def test_message_parent_is_seen_while_the_child_runs(world: World) -> None:
    with chat_server(
        turns(
            reply(None, ("message_parent", {"text": "halfway there"})),
            HOLD,
        )
    ) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("talker", prompt="talk")
                await until(server.holding.is_set, 30, "the second request")
                (row,) = session.children.list()
                assert (row.status, row.messages) == ("running", ["halfway there"])
                (report,) = await session.children.collect(["talker"], timeout_ms=0)
                assert (report.status, report.messages) == ("running", ["halfway there"])
                await session.children.delete("talker")

        run(scenario())


def test_max_turns_reached_stalls_the_child(world: World) -> None:
    with chat_server(turns(reply(None, ("bash", {"command": "true"})))) as server:
        world.model(server, max_turns=3)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("busy", prompt="never stop")
                report = await collect_one(session, "busy")
                assert report.status == "stalled"
                assert report.error is not None
                assert "max_turns" in report.error.message
                assert report.usage is not None
                assert report.usage.model_calls == 3

        run(scenario())
        assert len(server.requests) == 3


def test_two_500s_then_success(world: World) -> None:
    failing = Scripted({"error": {"message": "overloaded"}}, status=500)
    with chat_server(turns(failing, failing, reply("fine"))) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("retry", prompt="try")
                report = await collect_one(session, "retry")
                assert (report.status, report.answer) == ("answered", "fine")
                assert report.usage is not None
                assert report.usage.model_calls == 1  # the failed attempts gave no usage

        run(scenario())
        assert len(server.requests) == 3


def test_always_500_fails_with_model_error_within_a_bound(world: World) -> None:
    with chat_server(turns(Scripted({"error": {"message": "down for good"}}, status=503))) as server:
        world.model(server, max_retries=3)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("down", prompt="try")
                report = await collect_one(session, "down")
                assert report.status == "failed"
                assert report.error is not None
                assert (report.error.reason, report.error.http_status) == ("model_error", 503)
                assert "down for good" in report.error.message

        run(scenario())
        assert len(server.requests) == 4  # the first attempt and max_retries more


def test_429_waits_as_retry_after_says(world: World) -> None:
    limited = Scripted({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "1"})
    with chat_server(turns(limited, reply("after the wait"))) as server:
        world.model(server, backoff_ms=0)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("limited", prompt="try")
                report = await collect_one(session, "limited")
                assert (report.status, report.answer) == ("answered", "after the wait")

        run(scenario())
        first, second = server.requests
        assert second.at - first.at >= 0.95


def test_cancel_mid_request_closes_the_connection(world: World) -> None:
    with chat_server(turns(HOLD)) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("held", prompt="wait")
                await until(server.holding.is_set, 30, "the request")
                report = await session.children.delete("held")
                assert report.status == "cancelled"
                await until(server.closed.is_set, 30, "the server to see the connection close")

        run(scenario())


def test_a_bad_response_an_unknown_tool_and_bad_arguments_do_not_stop_the_loop(world: World) -> None:
    with chat_server(
        turns(
            Scripted(raw=b"this is not json{"),
            Scripted({"choices": []}),
            reply(None, ("no_such_tool", {}), ("bash", "{not json"), ("read", {"paht": "a.txt"})),
            reply("still here"),
        )
    ) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("odd", prompt="cope")
                report = await collect_one(session, "odd")
                assert (report.status, report.answer) == ("answered", "still here")

        run(scenario())
        second, third, fourth = (seen.body for seen in server.requests[1:])
        assert "not JSON" in second["messages"][-1]["content"]
        assert "choices[0]" in third["messages"][-1]["content"]
        unknown, undecoded, mistyped = tool_messages(fourth)
        assert unknown.startswith("unknown_tool:") and "no_such_tool" in unknown
        assert undecoded.startswith("bad_tool_arguments:") and "not JSON" in undecoded
        assert mistyped.startswith("bad_tool_arguments:") and "paht" in mistyped


def test_the_key_is_a_bearer_token_and_is_stored_nowhere(world: World) -> None:
    with chat_server(turns(reply(None, ("bash", {"command": "true"})), reply("ok"))) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("keyed", prompt="go")
                assert (await collect_one(session, "keyed")).status == "answered"

        run(scenario())
        assert {seen.headers.get("Authorization") for seen in server.requests} == {f"Bearer {KEY}"}
    for path in [*world.agent.rglob("*"), *world.work.rglob("*")]:
        if path.is_file() and not path.is_symlink():
            assert KEY.encode() not in path.read_bytes(), path


def test_two_children_run_at_once(world: World) -> None:
    def script(body: Any, number: int) -> Scripted | object:
        prompt = body["messages"][1]["content"]
        asked = [m for m in body["messages"] if m["role"] == "tool"]
        if not asked:  # each child's first turn waits until both are in flight
            both.wait(30)
            return reply(None, ("bash", {"command": f"echo {prompt} > {prompt}.txt"}))
        return reply(f"{prompt} done")

    class Both:
        def __init__(self) -> None:
            self.count = 0
            self.lock = threading.Lock()
            self.event = threading.Event()

        def wait(self, timeout: float) -> None:
            with self.lock:
                self.count += 1
                if self.count == 2:
                    self.event.set()
            assert self.event.wait(timeout), "the two children did not run at once"

    both = Both()
    with chat_server(script) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("left", prompt="left")
                await session.children.spawn("right", prompt="right")
                reports = {r.name: r for r in await session.children.collect(timeout_ms=30_000)}
                assert {name: (r.status, r.answer) for name, r in reports.items()} == {
                    "left": ("answered", "left done"),
                    "right": ("answered", "right done"),
                }
                assert (world.work / "left.txt").read_text() == "left\n"
                assert (world.work / "right.txt").read_text() == "right\n"

        run(scenario())


def test_code_and_prompt_both_or_neither_are_refused_by_name(world: World) -> None:
    async def scenario() -> None:
        async with parent(world) as session:
            with pytest.raises(InputError) as both:
                await session.children.spawn("x", "1", prompt="p")
            assert both.value.field == "prompt"
            with pytest.raises(InputError) as neither:
                await session.children.spawn("x")
            assert neither.value.field == "code"

    run(scenario())


def test_a_missing_model_setting_or_key_is_an_error_at_spawn_naming_the_setting(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        async with parent(world) as session:
            with pytest.raises(ModelNotConfiguredError) as unset:
                await session.children.spawn("x", prompt="p")
            assert (unset.value.code, unset.value.field) == ("model_not_configured", "model")
            (world.agent / "settings.json").write_text(
                json.dumps({"model": {"base_url": "http://127.0.0.1:9/v1", "name": "m", "api_key_env": KEY_ENV}})
            )
            monkeypatch.delenv(KEY_ENV)
            with pytest.raises(ModelNotConfiguredError) as keyless:
                await session.children.spawn("x", prompt="p")
            assert keyless.value.field == "model.api_key_env"
            assert KEY_ENV in str(keyless.value)
            assert session.children.list() == []

    run(scenario())


def test_a_spawn_names_another_model(world: World) -> None:
    with chat_server(turns(reply("hi"))) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("other", prompt="hi", model="cheaper-model")
                assert (await collect_one(session, "other")).answer == "hi"

        run(scenario())
        assert server.requests[0].body["model"] == "cheaper-model"


def test_a_prompt_child_cut_by_its_parents_close_ends_interrupted_with_its_transcript(world: World) -> None:
    with chat_server(turns(reply(None, ("bash", {"command": "true"})), HOLD)) as server:
        world.model(server)

        async def scenario() -> None:
            session = await Session.create(world.work, root=world.sessions)
            await session.children.spawn("cut", prompt="go on")
            await until(server.holding.is_set, 30, "the second request")
            await session.close()  # the host stops mid-loop
            again = await Session.open(session.id, root=world.sessions)
            try:
                report = await collect_one(again, "cut")
                assert report.status == "interrupted"
                child = await Session.open(report.session, root=world.sessions)
                try:
                    kinds = [entry.kind for entry in child.entries()]
                    tools = [slot.tool for slot in child.view_state().slots.values()]
                finally:
                    await child.close()
                assert kinds[:3] == ["notice", "user", "assistant"], kinds
                assert tools == ["bash"]
            finally:
                await again.close()

        run(scenario())


def test_the_timeout_stalls_a_prompt_child(world: World) -> None:
    with chat_server(turns(HOLD)) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                started = time.monotonic()
                await session.children.spawn("slow", prompt="wait", timeout_ms=300)
                report = await collect_one(session, "slow")
                assert report.status == "stalled"
                assert time.monotonic() - started < 20

        run(scenario())


def test_a_cell_spawns_a_prompt_child_isolated_and_collects_its_answer_hand_back_and_usage(world: World) -> None:
    with chat_server(
        turns(reply(None, ("edit", {"patch": "*** Begin Patch\n*** Add File: fixed.txt\n+fixed\n*** End Patch"})),
              reply(None, ("answer", {"value": "fixed it"})))
    ) as server:  # fmt: skip
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await cell(session, "row = rlm.spawn('fix', prompt='fix it', workspace='isolated')")
                done = await cell(
                    session,
                    "(report,) = rlm.collect(timeout_ms=30_000)\n"
                    "(report.status, report.answer, report.handback.paths_taken, report.usage.model_calls)",
                )
                assert done.result == "('answered', 'fixed it', ['fixed.txt'], 2)"
                assert (world.work / "fixed.txt").read_text() == "fixed\n"

        run(scenario())


def test_a_request_past_request_timeout_s_ends_that_attempt_and_the_next_one_answers(world: World) -> None:
    with chat_server(turns(HOLD, reply("the second attempt"))) as server:
        world.model(server, request_timeout_s=0.5)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("patient", prompt="wait")
                report = await collect_one(session, "patient")
                assert (report.status, report.answer) == ("answered", "the second attempt")

        run(scenario())
        assert server.closed.is_set()  # the first attempt's connection was closed by the client
        assert len(server.requests) == 2


def test_the_system_prompt_names_the_running_jobs_and_the_skills_offered(world: World) -> None:
    write_skill(world.work / ".agents" / "skills", "tidy-up", {"name": "tidy-up", "description": "Tidy a tree."})
    with chat_server(
        turns(
            reply(None, ("bash", {"command": "sleep 30", "budget_ms": 0})),
            reply(None, ("jobs_list", {})),
            reply("seen"),
        )
    ) as server:
        world.model(server)

        async def scenario() -> None:
            async with parent(world) as session:
                await session.children.spawn("aware", prompt="look around")
                assert (await collect_one(session, "aware")).answer == "seen"

        run(scenario())
        system = server.requests[0].body["messages"][0]["content"]
        assert "tidy-up" in system
        assert "Tidy a tree." in system
        assert "running-jobs" not in system  # none ran yet
        later = server.requests[2].body
        assert "sleep 30" in tool_messages(later)[1]  # its jobs_list shows the detached job
        now = later["messages"][0]["content"]
        assert '<running-jobs count="1">' in now  # the system prompt of each request says what runs then
        assert "sleep 30" in now
