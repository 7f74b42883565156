"""Every MCP tool call is a journaled call of its session (S2 "A tool call"): its start and its settle, nothing
between; its progress on the session's one board (what `eukhe watch` and MCP progress both read); a crash settles
it once, from what is durable; `eukhe session calls` and the `eukhe://session/*` resources show the calls.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from eukhe.calls.catalog import CALL_TOOLS
from eukhe.calls.runner import warnings_of
from eukhe.core.job import CallBegun, CallCancel, CallEvent, CallFail, CallOutput, CallReturn, CallWarning, journal
from eukhe.fs.errors import FsError
from eukhe.records.base import convert
from eukhe.records.journal import Commit
from eukhe.store.ledger import Ledger
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import eventually, mcp_server, run, text_of, workdir
from tests.ties.test_a_real_tool_calls_journal_equals_the_model import render_commit, render_model, settled_bytes

pytestmark = pytest.mark.real

LONG_MS = 120_000
"""A budget no call here reaches: each one ends when its test lets it."""


def journal_of(world: DaemonEnv, session: str) -> Path:
    return world.agent_dir / "sessions" / session / "main.jsonl"


def call_records(world: DaemonEnv, session: str, call: str) -> list[str]:
    """The tags of the journal's records that name `call` (its start, its settle, its result entry), in order."""
    found: list[str] = []
    for line in journal_of(world, session).read_bytes().splitlines():
        if not line.strip(b"\0 "):
            continue
        commit = json.loads(line)
        for record in commit.get("records", []):
            named = record.get("call") == call or (
                isinstance(record.get("content"), dict) and record["content"].get("call") == call
            )
            if named:
                found.append(str(record.get("t")))
    return found


def calls(world: DaemonEnv, session: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = world.json("session", "calls", session)["calls"]
    return rows


def running_call(world: DaemonEnv, session: str, tool: str) -> Any:
    rows = [row for row in calls(world, session) if row["tool"] == tool and row["status"] == "running"]
    return rows[0]["call"] if rows else None


def worker_pid(world: DaemonEnv, session: str) -> int:
    workers = {w["session"]: int(w["pid"]) for w in world.json("daemon", "status")["workers"]}
    return workers[session]


def waiting_cell(stop: Path) -> str:
    """A cell that prints a line every few ms until `stop` exists."""
    return (
        "import os, time\n"
        "i = 0\n"
        f"while not os.path.exists({str(stop)!r}):\n"
        "    print(f'line {i}', flush=True)\n"
        "    i += 1\n"
        "    time.sleep(0.02)\n"
        "'stopped'"
    )


def test_a_long_streaming_call_commits_nothing_between_its_start_and_its_settle(world: DaemonEnv) -> None:
    cwd = workdir(world)
    stop = cwd / "stop"

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            session = server.session
            async with anyio.create_task_group() as group:
                result: list[types.CallToolResult] = []

                async def call() -> None:
                    code = waiting_cell(stop)
                    result.append(await server.call("ipython", {"code": code, "budget_ms": LONG_MS}))

                group.start_soon(call)
                call_id = await eventually(lambda: running_call(world, session, "ipython"), "the call's start")
                journal = journal_of(world, session)
                size = journal.stat().st_size
                assert call_records(world, session, call_id) == ["call_start"]

                def printed(at_least: int) -> Any:
                    counted = world.json("watch", "--session", session, "--json", "--max-events", "1")["calls"]
                    rows = [row for row in counted if row["call"] == call_id and row["progress"] is not None]
                    job = rows[0]["progress"]["details"]["job"] if rows else None
                    return job is not None and job["lines_kept"] + job["lines_dropped"] >= at_least and job

                first = await eventually(lambda: printed(5), "the cell's output on the board")
                later = await eventually(lambda: printed(first["lines_kept"] + 20), "more of it")
                assert later["bytes_kept"] > first["bytes_kept"]
                assert journal.stat().st_size == size, "nothing was journaled while the call streamed"
                stop.touch()
            (settled,) = result
            assert not settled.is_error
            assert text_of(settled).rstrip().endswith("Out: 'stopped'")
            assert call_records(world, session, call_id) == ["call_start", "call_settle", "entry"]

    run(scenario)


def test_an_ipython_calls_progress_shows_its_output_so_far(world: DaemonEnv) -> None:
    cwd = workdir(world)
    stop = cwd / "stop"

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            messages: list[str] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                messages.append(message or "")
                if "last: line" in (message or ""):
                    stop.touch()

            result = await server.call(
                "ipython", {"code": waiting_cell(stop), "budget_ms": LONG_MS}, progress_callback=on_progress
            )
            assert not result.is_error
            shown = [message for message in messages if "last: line" in message]
            assert shown, messages
            assert "of output so far" in shown[0]

    run(scenario)


def test_eukhe_watch_shows_every_running_call_then_nothing_after_its_end(world: DaemonEnv) -> None:
    cwd = workdir(world)
    stop = cwd / "stop"
    command = f"echo one; while [ ! -e {stop} ]; do sleep 0.05; done; echo two"

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            session = server.session
            watch = world.start_cli("watch", "--session", session, "--json")
            assert watch.stdout is not None
            events: list[dict[str, Any]] = []
            lock = threading.Lock()

            def read() -> None:
                assert watch.stdout is not None
                for line in watch.stdout:
                    with lock:
                        events.append(json.loads(line))

            reader = threading.Thread(target=read, daemon=True)
            reader.start()

            def seen(kind: str, call: str | None = None) -> list[dict[str, Any]]:
                with lock:
                    return [e for e in events if e["type"] == kind and (call is None or e.get("call") == call)]

            await eventually(lambda: seen("snapshot"), "the watch's snapshot")
            async with anyio.create_task_group() as group:
                group.start_soon(server.call, "bash", {"command": command, "budget_ms": LONG_MS})
                call_id = await eventually(lambda: running_call(world, session, "bash"), "the call's start")

                def first_line() -> list[dict[str, Any]]:
                    updates = seen("tool_execution_update", call_id)
                    return [u for u in updates if u["progress"]["details"]["job"]["bytes_kept"] == 4]

                (update, *_) = await eventually(first_line, "its progress")
                assert update["tool"] == "bash"
                assert update["progress"]["details"]["tail"] == "one"
                stop.touch()
            (end,) = await eventually(lambda: seen("tool_execution_end", call_id), "its end")
            assert end["status"] == "returned"
            with lock:
                after_end = events[events.index(end) + 1 :]
            # Another call, to its end: the watch has seen everything the first call's end could be followed by.
            assert await server.text("jobs_list", {})
            other = await eventually(lambda: [e for e in seen("tool_execution_end") if e["call"] != call_id], "x")
            assert other[0]["tool"] == "jobs_list"
            with lock:
                after_end = events[events.index(end) + 1 :]
            assert not [e for e in after_end if e.get("call") == call_id], "nothing of a call after its end"
            watch.send_signal(signal.SIGINT)

    run(scenario)


def test_a_worker_killed_mid_call_settles_the_call_once_as_interrupted(world: DaemonEnv) -> None:
    cwd = workdir(world)
    stop = cwd / "stop"
    command = f"echo started; while [ ! -e {stop} ]; do sleep 0.05; done"

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            session = server.session
            async with anyio.create_task_group() as group:
                answers: list[types.CallToolResult | BaseException] = []

                async def call() -> None:
                    try:
                        answers.append(await server.call("bash", {"command": command, "budget_ms": LONG_MS}))
                    except MCPError as error:
                        answers.append(error)

                group.start_soon(call)
                call_id = await eventually(lambda: running_call(world, session, "bash"), "the call's start")

                def started() -> Any:
                    jobs = world.json("jobs", "list", "--session", session)["jobs"]
                    return [job for job in jobs if job["status"] == "running" and job["bytes_kept"] == 8]

                await eventually(started, "the job's first line")
                os.kill(worker_pid(world, session), signal.SIGKILL)
            (answer,) = answers
            assert isinstance(answer, MCPError) or answer.is_error, "the call's host died under it"

        async with mcp_server(world, "--session", session) as again:
            read = await again.client.read_resource("eukhe://session/calls")
            (contents,) = read.contents
            assert isinstance(contents, types.TextResourceContents)
            (row,) = [row for row in json.loads(contents.text)["calls"] if row["call"] == call_id]
            assert row["status"] == "interrupted"
            settle = world.json("session", "calls", session, "--call", call_id)["settle"]
            assert settle["status"] == "interrupted"
            assert settle["details"]["killed"] is True, "its job's end"
            assert settle["output"]["text"] == "started\n", "what the job wrote before its host died"
            assert settle["output"]["bytes_kept"] + settle["output"]["bytes_dropped"] == 8
        assert call_records(world, session, call_id).count("call_settle") == 1
        world.json("session", "close", session)
        world.json("session", "show", session)  # opened once more
        assert call_records(world, session, call_id).count("call_settle") == 1, "settled exactly once"

    run(scenario)


def test_session_calls_lists_each_call_with_its_status_and_prints_one_settle_whole(world: DaemonEnv) -> None:
    cwd = workdir(world)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            session = server.session
            assert await server.text("bash", {"command": "echo hello"}) == "hello\n[exit 0]"
            refused = await server.call("read", {"path": "missing.txt"})
            assert refused.is_error
            rows = calls(world, session)
            assert [(row["tool"], row["status"], row["outcome"]) for row in rows] == [
                ("bash", "done", "returned"),
                ("read", "done", "failed"),
            ]
            assert json.loads(rows[0]["args"]) == {
                "command": "echo hello",
                "budget_ms": None,
                "tty": False,
                "cols": None,
                "rows": None,
            }
            assert rows[0]["summary"] == "hello"
            assert rows[0]["started_ms"] <= rows[0]["settled_ms"]
            assert "missing.txt" in rows[1]["summary"]
            settle = world.json("session", "calls", session, "--call", rows[0]["call"])["settle"]
            assert settle["output"]["text"] == "hello\n[exit 0]"
            assert settle["details"]["exit_code"] == 0
            listed = world.cli("session", "calls", session)
            assert listed.returncode == 0
            assert f"{rows[0]['call']}  bash" in listed.stdout and "-> hello" in listed.stdout
            unknown = world.cli("session", "calls", session, "--call", "call-nope", "--json")
            assert unknown.returncode != 0
            assert json.loads(unknown.stdout)["error"] == "unknown_call"

    run(scenario)


def test_the_running_jobs_resource_names_each_running_job(world: DaemonEnv) -> None:
    cwd = workdir(world)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            listed = await server.client.list_resources()
            assert {str(r.uri) for r in listed.resources} == {
                "eukhe://session/running-jobs",
                "eukhe://session/calls",
                "eukhe://session/jobs",
            }

            async def section() -> str:
                read = await server.client.read_resource("eukhe://session/running-jobs")
                (contents,) = read.contents
                assert isinstance(contents, types.TextResourceContents)
                return contents.text

            assert await section() == "running-jobs: none"
            detached = await server.call("bash", {"command": "echo x; sleep 300", "budget_ms": 0})
            job = detached.structured_content["job"] if detached.structured_content else None
            assert job
            text = await section()
            assert text.startswith("running-jobs: 1 job running")
            assert job in text and "sleep 300" in text
            await server.call("jobs_cancel", {"job": job})
            assert await section() == "running-jobs: none"

    run(scenario)


# --- the tie on the MCP path ------------------------------------------------------------------------------------------

TIE_CALLS = 40
TIE_GROUP = 4


def tie_call(rng: random.Random, index: int, cwd: Path) -> tuple[str, dict[str, Any], bool]:
    """One generated MCP call: its tool, its arguments (each one unique, so the journal's call is found by them),
    and whether the client cancels it once it runs."""
    kind = rng.randrange(7)
    tag = f"c{index:02d}"
    if kind == 0:
        return "bash", {"command": f"echo {tag}; echo {'x' * rng.randrange(0, 30)}"}, False
    if kind == 1:  # past the bound: a warning
        return "bash", {"command": f"echo {tag}; seq 1 {rng.randrange(3000, 6000)}"}, False
    if kind == 2:  # past the budget: detached, a warning
        return "bash", {"command": f"echo {tag}; sleep 0.2", "budget_ms": 0}, False
    if kind == 3:  # refused: a failed call
        return "read", {"path": f"missing-{tag}.txt"}, False
    if kind == 4:
        return "write", {"path": f"{tag}.txt", "content": tag * rng.randrange(1, 9)}, False
    if kind == 5:
        return "glob", {"pattern": f"{tag}*"}, False
    stop = cwd / f"stop-{tag}"
    return "bash", {"command": f"echo {tag}; while [ ! -e {stop} ]; do sleep 0.05; done", "budget_ms": LONG_MS}, True


def decoded_key(tool: str, args: dict[str, Any]) -> str:
    """A call's arguments as its start records them (the tool's record, defaults filled in), as one JSON text."""
    return json.dumps(convert(args, CALL_TOOLS[tool].args, code="x", what=tool).to_json(), sort_keys=True)


def test_a_real_tool_calls_journal_equals_the_model_on_the_mcp_path(world: DaemonEnv) -> None:
    """40 real MCP tool calls (results, warnings, refusals, cancellations), four at a time: each call's journal
    transcript (`start`, `settle ...` read back from its result entry, or `progress` for any other record of its
    slot) equals what `core.job.journal` says of the events the call reported: the text the model read, each
    warning (`warnings_of` its answer; a refusal's message), and its end."""
    cwd = workdir(world)
    rng = random.Random(20261201)
    planned = [tie_call(rng, index, cwd) for index in range(TIE_CALLS)]
    assert any(cancel for _, _, cancel in planned) and any(not cancel for _, _, cancel in planned)
    seen: dict[str, tuple[bool, bool, str, list[str]]] = {}  # key -> (cancelled, refused, text, warnings)

    async def scenario() -> str:
        async with mcp_server(world, "--sandbox", "off", "--cwd", str(cwd)) as server:
            session = server.session

            async def one(tool: str, args: dict[str, Any], cancel: bool) -> None:
                key = decoded_key(tool, args)
                if not cancel:
                    result = await server.call(tool, args)
                    text = text_of(result)
                    if result.is_error:  # a refused read: its message is the settle's one warning
                        seen[key] = (False, True, text, [text.split("): ", 1)[1]])
                        return
                    answer = convert(result.structured_content, CALL_TOOLS[tool].answer, code="x", what=tool)
                    seen[key] = (False, False, text, warnings_of(answer))
                    return
                scope = anyio.CancelScope()

                async def call() -> None:
                    with scope:
                        await server.call(tool, args)

                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    await eventually(lambda: running_call_with(world, session, key), "the call to run")
                    scope.cancel()
                seen[key] = (True, False, "", [])

            for low in range(0, TIE_CALLS, TIE_GROUP):
                async with anyio.create_task_group() as group:
                    for tool, args, cancel in planned[low : low + TIE_GROUP]:
                        group.start_soon(one, tool, args, cancel)
            await eventually(lambda: all(row["status"] != "running" for row in calls(world, session)), "settles")
            return session

    session = anyio.run(scenario)
    ledger, _ = Ledger.load(journal_of(world, session))
    ledger.close()
    commits = [Commit(seq=seq, records=list(records)) for seq, records in ledger.commits]
    by_key = {json.dumps(slot.args, sort_keys=True): slot.call for slot in ledger.trees.slots.values()}
    real: list[str] = []
    model: list[str] = []
    for tool, args, _ in planned:
        key = decoded_key(tool, args)
        call_id = by_key[key]
        cancelled, refused, text, warnings = seen[key]
        real += [f"{tool} {line}" for commit in commits if (line := render_commit(call_id, commit)) is not None]
        settled = settled_bytes(call_id, commits)
        events: list[CallEvent] = [CallBegun()]
        if cancelled:  # the text of a cancelled call (how its job ended) only its settle holds: its bytes count
            assert b"killed" in settled, settled
            events += [CallOutput(len(settled)), CallCancel()]
        elif refused:
            events += [CallFail(f"{FsError.__name__}: {warnings[0]}")]
        else:
            assert settled == text.encode(), "the settle holds the text the model read"
            events += [CallOutput(len(settled)), *(CallWarning(warning) for warning in warnings), CallReturn()]
        model += [f"{tool} {line}" for line in render_model(journal(events))]
    print("\n".join(real))
    assert "\n".join(real) == "\n".join(model)


def running_call_with(world: DaemonEnv, session: str, key: str) -> bool:
    """Whether the session journaled the start of a call with these arguments, not yet its settle."""
    for row in calls(world, session):
        if row["status"] == "running" and json.loads(row["args"]) == json.loads(key):
            return True
    return False
