"""`eukhe mcp` end to end: the real MCP client (`mcp.client.stdio`) against `eukhe mcp` as a
subprocess, each test with a private daemon (the `world` fixture's env; cells run on this interpreter): the jobs
tools, the file tools and children.

Waits are bounded polls of real events (a pid file written, a job listed, a group gone), never bare sleeps; the
sleeps inside the commands are the commands' own work.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from eukhe.calls.texts import job_line
from eukhe.mcp.tools import TOOLS, object_schema
from eukhe.procs import alive, group_alive
from tests.real.conftest import DaemonEnv
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

POLL_S = 0.05
DEADLINE_S = 30.0
LOOKING = {"jobs_list", "jobs_wait", "read", "grep", "glob", "collect", "subagents"}
"""The tools that change nothing: their `readOnlyHint` is true."""


class Server:
    """One `eukhe mcp` under the real client: its session, its stderr, its session id and pid."""

    def __init__(
        self, client: ClientSession, init: types.InitializeResult, errlog: Path, write: MemoryObjectSendStream[Any]
    ) -> None:
        self.client = client
        self._write = write
        self.init = init
        self.errlog = errlog
        found = re.search(r"session ([0-9a-f]+)", init.instructions or "")
        assert found, init.instructions
        self.session = found.group(1)

    @property
    def stderr(self) -> str:
        return self.errlog.read_text()

    @property
    def pid(self) -> int:
        found = re.search(r"^eukhe mcp\[(\d+)\]", self.stderr, re.MULTILINE)
        assert found, self.stderr
        return int(found.group(1))

    async def client_write_stream_closed(self) -> None:
        """The client stops writing (as one that dies would): nothing more reaches the server, not even a cancel."""
        await self._write.aclose()

    async def call(self, tool: str, args: dict[str, Any], **options: Any) -> types.CallToolResult:
        return await self.client.call_tool(tool, args, **options)

    async def text(self, tool: str, args: dict[str, Any]) -> str:
        result = await self.call(tool, args)
        assert not result.is_error, result.content
        return text_of(result)


def text_of(result: types.CallToolResult) -> str:
    """The result's text: its first block; the others, if any, are a cell's images and a cut output's link."""
    block, *more = result.content
    assert isinstance(block, types.TextContent)
    assert all(isinstance(extra, types.ImageContent | types.ResourceLink) for extra in more), more
    return block.text


@asynccontextmanager
async def mcp_server(
    world: DaemonEnv, *args: str, structured: bool = True, client_name: str | None = None
) -> AsyncIterator[Server]:
    """`eukhe mcp ARGS` under the real client, initialized; stderr goes to a file of the world. `structured`: with
    `--structured`, so that a test can check the answer records (the default server sends text only);
    `client_name`: the `clientInfo.name` the client gives (default: the SDK's)."""
    errlog = world.root / f"mcp-{len(list(world.root.glob('mcp-*.err')))}.err"
    argv = ["-m", "eukhe.cli.main", "mcp", *args, *(["--structured"] if structured else [])]
    params = StdioServerParameters(command=sys.executable, args=argv, env=world.env)
    info = None if client_name is None else types.Implementation(name=client_name, version="1.0")
    with errlog.open("w") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write, client_info=info) as client,
        ):
            yield Server(client, await client.initialize(), errlog, write)


def workdir(world: DaemonEnv) -> Path:
    path = world.root / "w"
    path.mkdir(exist_ok=True)
    return path


def held_until(go: Path) -> str:
    """A command that prints `start`, runs on until the file `go` exists, then prints `done` (11 bytes, 2 lines):
    a job still running when the test acts, whatever the load, and ended by the test making `go`."""
    return f"echo start; while [ ! -e {go} ]; do sleep 0.01; done; echo done"


async def eventually(check: Callable[[], Any | Awaitable[Any]], what: str, timeout: float = DEADLINE_S) -> Any:
    """Poll a real condition until it holds (its value), bounded by a deadline."""
    with anyio.fail_after(timeout):
        while True:
            value = check()
            if isinstance(value, Awaitable):
                value = await value
            if value:
                return value
            await anyio.sleep(POLL_S)
    raise AssertionError(f"timed out waiting for {what}")  # pragma: no cover  (fail_after raises first)


def only_diagnostics(stderr: str) -> None:
    """The server's stderr carries its diagnostics only: each line one of its log lines."""
    for line in stderr.splitlines():
        assert line.startswith("eukhe mcp["), line


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


# ---------------------------------------------------------------------------------------------------------------------


def test_mcp_lists_the_tools_with_their_schemas_and_the_session_outlives_the_server(world: DaemonEnv) -> None:
    cwd = workdir(world)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            listing = await server.client.list_tools()
            assert [tool.name for tool in listing.tools] == list(TOOLS), "tests/unit/test_mcp_tools.py pins the names"
            assert len(listing.tools) == 16
            for tool in listing.tools:
                row = TOOLS[tool.name]
                assert tool.input_schema == object_schema(row.args)
                assert tool.output_schema == object_schema(row.answer)
                assert tool.description == row.description
                assert tool.annotations is not None
                assert tool.annotations.read_only_hint is (tool.name in LOOKING), tool.name
            assert server.init.server_info.name == "eukhe"
            assert str(cwd) in (server.init.instructions or "")
            session = server.session
            errlog = server.errlog
        sessions = {row["id"]: row for row in world.json("session", "list")["sessions"]}
        assert sessions[session]["cwd"] == str(cwd)
        assert sessions[session]["open"] is True, "the session stays open in the daemon after the client left"
        only_diagnostics(errlog.read_text())

    run(scenario)


def test_mcp_bash_settles_with_clean_text_and_exact_counts_and_a_flood_is_bounded(world: DaemonEnv) -> None:
    command = r"printf '\033[1;31mred\033[0m\n'; for i in 1 2 3; do printf '\r%d%%' $((i*33)); done; printf '\n\377\n'"
    raw = b"\x1b[1;31mred\x1b[0m\n\r33%\r66%\r99%\n\xff\n"
    flood = b"".join(b"%d\n" % i for i in range(1, 100_001))

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            result = await server.call("bash", {"command": command + "; exit 3"})
            assert not result.is_error
            assert text_of(result) == "red\n99%\n\ufffd\n[exit 3]"
            answer = result.structured_content
            assert answer["status"] == "settled"
            assert answer["exit_code"] == 3
            output = answer["output"]
            assert (output["bytes_kept"], output["bytes_dropped"], output["lines_kept"]) == (len(raw), 0, 3)
            assert base64.b64decode(output["text_base64"]) == raw, "the record keeps the exact bytes"

            result = await server.call("bash", {"command": "seq 1 100000"})
            text = text_of(result)
            output = result.structured_content["output"]
            notice, first, *_ = text.splitlines()
            assert notice == output["notice"], "a tail window: the notice comes first, where the output was cut"
            assert "dropped from the start" in notice
            assert output["artifact"] in notice
            assert first == "98001"
            assert text.endswith("100000\n[exit 0]")
            assert output["bytes_kept"] + output["bytes_dropped"] == len(flood)
            assert (output["lines_kept"], output["lines_dropped"]) == (2000, 98_000)
            assert Path(output["artifact"]).read_bytes() == flood, "the artifact keeps every raw byte"
            only_diagnostics(server.stderr)

    run(scenario)


def test_mcp_bash_detaches_at_its_budget_then_jobs_wait_settles_it(world: DaemonEnv) -> None:
    async def scenario() -> None:
        cwd = workdir(world)
        command = held_until(cwd / "go")
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            result = await server.call("bash", {"command": command, "budget_ms": 300})
            answer = result.structured_content
            assert answer["status"] == "detached"
            job = answer["job"]
            # "start" is there unless the machine was too loaded to run echo within the 300 ms budget.
            assert text_of(result).splitlines() in (["start", job_line(job, 300)], [job_line(job, 300)])
            assert f"{job}  bash  running" in await server.text("jobs_list", {})

            reports: list[str | None] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                reports.append(message)
                (cwd / "go").touch()  # the job ends once its wait reported its progress

            waited = await server.call("jobs_wait", {"job": job, "timeout_ms": 60_000}, progress_callback=on_progress)
            assert reports, "a wait reports its job's progress (at least every second) while the job runs"
            assert all((message or "").startswith(f"job {job} running for ") for message in reports), reports
            assert waited.structured_content["status"] == "settled"
            assert waited.structured_content["exit_code"] == 0
            assert text_of(waited) == "start\ndone\n[exit 0]"
            assert f"{job}  bash  exit 0 (11 bytes, 2 lines)" in await server.text("jobs_list", {})

    run(scenario)


def test_mcp_ipython_gives_a_value_an_error_and_keeps_state_across_calls(world: DaemonEnv) -> None:
    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            value = await server.call("ipython", {"code": "print('hi')\nx = 6 * 7\nx"})
            assert value.structured_content["outcome"] == "ok"
            assert value.structured_content["result"] == "42"
            assert text_of(value) == "hi\nOut: 42"

            assert await server.text("ipython", {"code": "x + 1"}) == "Out: 43"

            error = await server.call("ipython", {"code": "1 / 0"})
            assert not error.is_error, "a cell that raises is a result the model reads, not a refused call"
            assert error.structured_content["outcome"] == "error"
            assert error.structured_content["error"]["ename"] == "ZeroDivisionError"
            text = text_of(error)
            assert "ZeroDivisionError: division by zero" in text
            assert text.endswith("[cell raised ZeroDivisionError]")
            assert "\x1b" not in text

    run(scenario)


def test_mcp_an_unknown_or_mistyped_argument_is_a_tool_error_naming_the_field(world: DaemonEnv) -> None:
    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            unknown = await server.call("bash", {"command": "true", "budgetMs": 5})
            assert unknown.is_error
            assert unknown.structured_content is None
            assert text_of(unknown) == "bad_tool_arguments: bash: unknown field budgetMs (did you mean budget_ms?)"

            mistyped = await server.call("bash", {"command": ["echo", "hi"]})
            assert mistyped.is_error
            assert text_of(mistyped).startswith("bad_tool_arguments: bash: command must be str")

            missing = await server.call("jobs_wait", {"timeout_ms": 5})
            assert text_of(missing) == "bad_tool_arguments: jobs_wait: missing required field job"

            refusals = {
                "read": ({"path": "a.txt", "offest": 2}, "unknown field offest (did you mean offset?)"),
                "write": ({"path": "a.txt"}, "missing required field content"),
                "edit": ({"patch": None}, "patch must be str"),
                "grep": ({"pattern": "x", "glob": ["*.py"]}, "glob must be str | null"),
                "glob": ({"pattern": "*", "cwd": "."}, "unknown field cwd"),
                "spawn": ({"name": "w", "code": "1", "workspace": "copy"}, "workspace: Invalid enum value 'copy'"),
                "collect": ({"names": "w"}, "names must be array | null"),
                "subagents": ({"all": True}, "unknown field all"),
            }
            for tool, (args, said) in refusals.items():
                refused = await server.call(tool, args)
                assert refused.is_error, tool
                assert text_of(refused).startswith(f"bad_tool_arguments: {tool}: {said}"), text_of(refused)
            assert not (workdir(world) / "a.txt").exists(), "a refused call does nothing"

            no_job = await server.call("jobs_cancel", {"job": "job-00000000"})
            assert no_job.is_error
            assert text_of(no_job).startswith("unknown_job:")

            with pytest.raises(MCPError) as no_tool:
                await server.call("rm_rf", {})
            assert no_tool.value.code == types.INVALID_PARAMS
            assert await server.text("bash", {"command": "echo still serving"}) == "still serving\n[exit 0]"

    run(scenario)


def test_mcp_a_3_second_command_reports_its_bytes_and_lines_as_progress(world: DaemonEnv) -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            command = "for i in 1 2 3; do echo tick $i; sleep 1; done"
            result = await server.call("bash", {"command": command}, progress_callback=on_progress)
            assert text_of(result) == "tick 1\ntick 2\ntick 3\n[exit 0]"
            job = result.structured_content["job"]
        assert len(reports) >= 3, reports
        progress = [value for value, _, _ in reports]
        assert progress == sorted(set(progress)), "progress grows with every notification"
        messages = [message or "" for _, _, message in reports]
        assert all(message.startswith(f"job {job} running for ") for message in messages), messages
        counted = [re.search(r": (\d+) bytes?, (\d+) lines? of output so far", message) for message in messages]
        seen = [(int(found.group(1)), int(found.group(2))) for found in counted if found]
        assert any(count >= (7, 1) for count in seen), messages
        assert seen == sorted(seen), "the bytes and lines so far never go back"
        assert all(count <= (21, 3) for count in seen), messages

    run(scenario)


def test_mcp_a_cancelled_bash_call_ends_its_whole_process_group(world: DaemonEnv) -> None:
    pids = world.root / "pids"
    command = f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; sleep 301 & echo $! >> {pids}; wait"

    async def scenario() -> None:
        async with mcp_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:
            async with anyio.create_task_group() as group:
                scope = anyio.CancelScope()

                async def call() -> None:
                    with scope:
                        await server.call("bash", {"command": command})
                    assert scope.cancelled_caught, "the call ended before it was cancelled"

                group.start_soon(call)
                members = await eventually(
                    lambda: pids.exists() and len(found := pids.read_text().split()) == 3 and found, "the pid file"
                )
                group_id = os.getpgid(int(members[0]))
                assert all(os.getpgid(int(pid)) == group_id for pid in members)
                scope.cancel()  # the client sends notifications/cancelled
            await eventually(lambda: not group_alive(group_id), "the job's group to end")
            assert not any(alive(int(pid)) for pid in members)
            (row,) = (await server.call("jobs_list", {})).structured_content["jobs"]
            assert (row["status"], row["killed"]) == ("ended", True)
            await eventually(lambda: "cancelled by the client" in server.stderr, "the server's diagnostic")
            assert await server.text("bash", {"command": "echo after"}) == "after\n[exit 0]"

    run(scenario)


def test_mcp_a_cancelled_ipython_call_interrupts_its_cell(world: DaemonEnv) -> None:
    started = world.root / "cell-started"

    async def scenario() -> None:
        async with mcp_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:
            assert await server.text("ipython", {"code": "kept = 'state'"}) == "(no output)"
            async with anyio.create_task_group() as group:
                scope = anyio.CancelScope()

                async def call() -> None:
                    with scope:
                        code = f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(300)"
                        await server.call("ipython", {"code": code})
                    assert scope.cancelled_caught, "the call ended before it was cancelled"

                group.start_soon(call)
                await eventually(started.exists, "the cell to start")
                scope.cancel()

            async def cell_ended() -> Any:
                jobs = (await server.call("jobs_list", {})).structured_content["jobs"]
                return [job for job in jobs if job["kind"] == "cell" and job["status"] == "ended"]

            (cell,) = await eventually(cell_ended, "the cancelled cell's job to end")
            assert cell["killed"] is True, "a cancelled job ends killed (S2 jobs 3), its cell interrupted"
            assert await server.text("ipython", {"code": "kept"}) == "Out: 'state'", "interrupted: the namespace stays"

    run(scenario)


def test_mcp_a_server_killed_mid_call_leaves_the_session_its_journal_and_its_job(world: DaemonEnv) -> None:
    go = workdir(world) / "go"
    command = held_until(go)  # runs on until the server is gone

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            session, pid = server.session, server.pid
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    with pytest.raises(MCPError):  # the connection closes under the call
                        await server.call("bash", {"command": command})

                group.start_soon(call)

                def running() -> Any:
                    jobs = world.json("jobs", "list", "--session", session)["jobs"]
                    return [job["id"] for job in jobs if job["status"] == "running"]

                (job,) = await eventually(running, "the job to run")
                os.kill(pid, signal.SIGKILL)
        await eventually(lambda: not alive(pid), "the server to be gone")
        assert running() == [job], "the call's job outlives its server"
        go.touch()

        sessions = {row["id"]: row for row in world.json("session", "list")["sessions"]}
        assert sessions[session]["open"] is True
        waited = world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "20000")
        assert (waited["status"], waited["exit_code"], waited["output"]["text"]) == ("settled", 0, "start\ndone\n")

        def journaled() -> Any:
            entries = world.json("session", "show", session)["entries"]
            return [entry["content"] for entry in entries if entry["kind"] == "notice"]

        rows = await eventually(journaled, "the run's row in the journal")
        assert [(row["job"], row["command"], row["exit_code"]) for row in rows] == [(job, command, 0)]
        (settled,) = [row for row in world.json("session", "calls", session)["calls"] if row["tool"] == "bash"]
        assert settled["status"] == "done", "the call ran on in the daemon to its settle"

        async with mcp_server(world, "--session", session) as again:
            assert again.session == session
            listed = await again.text("jobs_list", {})
            assert f"{job}  bash  exit 0 (11 bytes, 2 lines)" in listed

    run(scenario)


def test_mcp_a_client_that_leaves_mid_call_leaves_the_job_running(world: DaemonEnv) -> None:
    """The server's input closes while a call runs, with no cancel: the call and its job go on in the daemon."""

    go = workdir(world) / "go"
    command = held_until(go)  # runs on until the client left

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            session = server.session
            async with anyio.create_task_group() as group:
                scope = anyio.CancelScope()

                async def call() -> None:
                    with scope:
                        await server.call("bash", {"command": command})

                group.start_soon(call)

                def running() -> Any:
                    jobs = world.json("jobs", "list", "--session", session)["jobs"]
                    return [job["id"] for job in jobs if job["status"] == "running"]

                (job,) = await eventually(running, "the job to run")
                await server.client_write_stream_closed()
                scope.cancel()  # the client gives up on the call; its courtesy cancel cannot be sent
        assert running() == [job], "the server left (the client's exit waited for it); its call's job runs on"
        go.touch()
        waited = world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "20000")
        assert (waited["status"], waited["exit_code"], waited["killed"]) == ("settled", 0, False)
        assert waited["output"]["text"] == "start\ndone\n"

    run(scenario)


def test_mcp_a_daemon_stopped_between_calls_is_started_again_and_the_session_reopened(world: DaemonEnv) -> None:
    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            assert await server.text("bash", {"command": "echo one"}) == "one\n[exit 0]"
            first = world.daemon_pid()
            world.cli("daemon", "stop")
            assert await server.text("bash", {"command": "echo two"}) == "two\n[exit 0]"
            assert world.daemon_pid() not in (None, first)
            sessions = {row["id"]: row for row in world.json("session", "list")["sessions"]}
            assert sessions[server.session]["open"] is True
            await eventually(lambda: "starting one" in server.stderr, "the server's diagnostic")

    run(scenario)


def test_mcp_twenty_concurrent_tool_calls_on_one_server(world: DaemonEnv) -> None:
    """Each call waits (at most 10 s) until all twenty have started: calls run one after another would not see 20."""
    barrier = world.root / "barrier"
    barrier.mkdir()
    results: dict[int, types.CallToolResult] = {}

    async def scenario() -> None:
        async with mcp_server(world, "--sandbox", "off", "--cwd", str(workdir(world))) as server:

            async def call(index: int) -> None:
                command = (
                    f"touch {barrier}/{index}; "
                    f"for k in $(seq 1 200); do [ $(ls {barrier} | wc -l) -ge 20 ] && break; sleep 0.05; done; "
                    f"echo call {index} saw $(ls {barrier} | wc -l)"
                )
                results[index] = await server.call("bash", {"command": command})

            with anyio.fail_after(60):  # twenty calls one after another would take 200 s
                async with anyio.create_task_group() as group:
                    for index in range(20):
                        group.start_soon(call, index)
            jobs = (await server.call("jobs_list", {})).structured_content["jobs"]
        for index, result in results.items():
            assert text_of(result) == f"call {index} saw 20\n[exit 0]"
        assert len({result.structured_content["job"] for result in results.values()}) == 20
        assert len(jobs) == 20

    run(scenario)


def test_mcp_serves_a_stdin_that_is_a_regular_file(world: DaemonEnv) -> None:
    """A stdin the event loop cannot watch (a file) is served by the SDK's own transport. The file ends at once, so
    only `initialize` (answered before the next line is read) is sure to be answered; then the server leaves."""
    init = types.InitializeRequestParams(
        protocol_version="2025-11-25",
        capabilities=types.ClientCapabilities(),
        client_info=types.Implementation(name="test", version="1"),
    )
    request = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="initialize", params=init.model_dump(by_alias=True))
    requests = world.root / "requests.jsonl"
    requests.write_text(request.model_dump_json(by_alias=True, exclude_none=True) + "\n")
    with requests.open() as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "eukhe.cli.main", "mcp", "--cwd", str(workdir(world))],
            stdin=stdin,
            capture_output=True,
            env=world.env,
            timeout=60,
            check=True,
        )
    (reply,) = [types.jsonrpc_message_adapter.validate_json(line) for line in done.stdout.splitlines()]
    assert isinstance(reply, types.JSONRPCResponse)
    assert reply.id == 1
    assert types.InitializeResult.model_validate(reply.result).server_info.name == "eukhe"
    only_diagnostics(done.stderr.decode())


def test_mcp_file_tools_round_trip_in_the_sessions_directory_and_refusals_name_their_reason(world: DaemonEnv) -> None:
    cwd = workdir(world)
    here = Path(os.path.realpath(cwd))
    flood = "".join(f"{i}\n" for i in range(1, 100_001))
    (cwd / "flood.txt").write_text(flood)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            wrote = await server.call("write", {"path": "src/app.py", "content": "def main():\n    run()\n"})
            assert text_of(wrote) == f"created {here / 'src' / 'app.py'} (22 bytes)", "relative to the session's cwd"
            assert wrote.structured_content == {
                "absolute": str(here / "src" / "app.py"),
                "bytes_written": 22,
                "created": True,
            }
            assert (cwd / "src" / "app.py").read_text() == "def main():\n    run()\n"

            patch = (
                "*** Begin Patch\n*** Update File: src/app.py\n-    run()\n+    run(fast=True)\n"
                "*** Add File: notes.md\n+\x1b[1mbold\x1b[0m note\n*** End Patch"
            )
            edited = await server.call("edit", {"patch": patch})
            assert not edited.is_error, text_of(edited)
            changes = edited.structured_content["changes"]
            assert [(change["action"], Path(change["path"]).name) for change in changes] == [
                ("updated", "app.py"),
                ("added", "notes.md"),
            ]
            assert text_of(edited).splitlines() == [f"{c['action']} {c['path']}" for c in changes]
            assert (cwd / "src" / "app.py").read_text() == "def main():\n    run(fast=True)\n"

            read = await server.call("read", {"path": "src/app.py", "offset": 2})
            assert text_of(read) == f"    run(fast=True)\n[{here / 'src' / 'app.py'}: lines 2-2 of 2]"
            assert (read.structured_content["offset"], read.structured_content["lines"]) == (2, 1)
            assert read.structured_content["total_lines"] == 2
            notes = await server.call("read", {"path": str(here / "notes.md")})
            assert text_of(notes) == f"bold note\n[{here / 'notes.md'}: lines 1-1 of 1]", "rendered for the model"
            assert notes.structured_content["output"]["text"] == "\x1b[1mbold\x1b[0m note\n", "the record is exact"

            grep = await server.call("grep", {"pattern": r"run\(", "glob": "*.py"})
            assert text_of(grep) == f"src/app.py:2:    run(fast=True)\n[1 match in 1 file under {here}]"
            assert (grep.structured_content["matches"], grep.structured_content["files"]) == (1, 1)
            assert text_of(await server.call("grep", {"pattern": "nowhere"})) == f"[no matches under {here}]"
            glob = await server.call("glob", {"pattern": "**/*.py"})
            assert text_of(glob) == f"src/app.py\n[1 file under {here}]"
            assert glob.structured_content["count"] == 1

            missing = await server.call("read", {"path": "nope.txt"})
            assert missing.is_error
            assert missing.structured_content is None
            assert text_of(missing).startswith("fs_error (not_found): ")
            assert "nope.txt" in text_of(missing)
            unfound = "*** Begin Patch\n*** Update File: src/app.py\n-    walk()\n+    fly()\n*** End Patch"
            failed = await server.call("edit", {"patch": unfound})
            assert failed.is_error
            assert text_of(failed).startswith("fs_error (patch_failed): ")
            assert "src/app.py" in text_of(failed)
            assert (cwd / "src" / "app.py").read_text() == "def main():\n    run(fast=True)\n", "nothing changed"
            onto_dir = await server.call("write", {"path": "src", "content": "x"})
            assert text_of(onto_dir).startswith("fs_error (is_a_directory): ")

            whole = await server.call("read", {"path": "flood.txt"})
            output = whole.structured_content["output"]
            assert (output["lines_kept"], output["lines_dropped"]) == (2000, 98_000)
            assert output["bytes_kept"] + output["bytes_dropped"] == len(flood)
            assert Path(output["artifact"]).read_text() == flood, "the artifact holds every line read"
            lines = text_of(whole).splitlines()
            assert lines[:2] == ["1", "2"]
            assert lines[1999] == "2000"
            assert lines[2000] == output["notice"], "a head window: the notice comes after the text, where it was cut"
            assert "dropped from the end" in lines[2000]
            assert output["artifact"] in lines[2000]
            assert lines[2001:] == [f"[{here / 'flood.txt'}: lines 1-100000 of 100000; read on with offset 2001]"]
            zeros = await server.call("grep", {"pattern": "0$", "path": "flood.txt"})
            assert zeros.structured_content["matches"] == 10_000
            assert zeros.structured_content["output"]["lines_kept"] == 2000
            assert text_of(zeros).endswith(f"[10000 matches in 1 file under {here / 'flood.txt'}]")
            assert zeros.structured_content["output"]["notice"] in text_of(zeros)
            only_diagnostics(server.stderr)

    run(scenario)


def test_mcp_edit_takes_padded_markers_refuses_an_empty_patch_and_explains_its_refusals(world: DaemonEnv) -> None:
    cwd = workdir(world)
    here = Path(os.path.realpath(cwd))
    (cwd / "a.txt").write_text("one\n")
    (cwd / "b.txt").write_text("two\n")

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            padded = " *** Begin Patch\n  *** Update File: a.txt\n one\n+more\n *** End of File\n *** End Patch "
            edited = await server.call("edit", {"patch": padded})
            assert not edited.is_error, text_of(edited)
            assert text_of(edited) == f"updated {here / 'a.txt'}"
            assert (cwd / "a.txt").read_text() == "one\nmore\n"

            empty = await server.call("edit", {"patch": "*** Begin Patch\n*** End Patch\n"})
            assert empty.is_error
            assert text_of(empty).startswith("fs_error (patch_failed): the patch changes nothing: "), text_of(empty)

            add = await server.call("edit", {"patch": "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch"})
            assert add.is_error
            a = here / "a.txt"
            assert f"use '*** Update File: {a}', or to replace it, put '*** Delete File: {a}' before" in text_of(add)
            move = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch"
            moved = await server.call("edit", {"patch": move})
            assert moved.is_error
            b = here / "b.txt"
            assert f"cannot move to {b}: a file already exists there; to replace it, put '*** Delete File: {b}'" in (
                text_of(moved)
            )
            assert ((cwd / "a.txt").read_text(), (cwd / "b.txt").read_text()) == ("one\nmore\n", "two\n")
            only_diagnostics(server.stderr)

    run(scenario)


def test_mcp_spawn_an_isolated_child_that_edits_a_file_collect_its_report_and_a_cancelled_collect_spares_it(
    world: DaemonEnv,
) -> None:
    """The child edits a.txt in its copy, then waits for `go`: a collect cancelled meanwhile stops its wait, never
    the child; the next collect reports progress (on which the test writes `go`), then the child's report."""
    cwd = workdir(world)
    need_tools("git")
    subprocess.run(["git", "init", "-q", str(cwd)], check=True)
    (cwd / "a.txt").write_text("a\n")
    go = world.root / "go"
    code = (
        "import os, time\n"
        "rlm.fs.edit('*** Begin Patch\\n*** Update File: a.txt\\n-a\\n+a by the child\\n*** End Patch')\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n"
        "rlm.answer({'edited': ['a.txt'], 'pid': os.getpid()})"
    )

    async def scenario() -> None:
        async with mcp_server(world, "--sandbox", "off", "--cwd", str(cwd)) as server:
            spawned = await server.call("spawn", {"name": "worker", "code": code, "workspace": "isolated"})
            assert not spawned.is_error, text_of(spawned)
            row = spawned.structured_content
            assert (row["name"], row["status"], row["workspace"]) == ("worker", "running", "isolated")
            assert row["cwd"] != str(cwd), "an isolated child works in a copy"
            assert text_of(spawned).splitlines() == [
                f"worker: running (session {row['session']}, isolated workspace {row['cwd']})",
                '[collect {"names": ["worker"]} waits for its report; subagents lists the children]',
            ]
            await eventually(lambda: (Path(row["cwd"]) / "a.txt").read_text() == "a by the child\n", "the edit")
            assert (cwd / "a.txt").read_text() == "a\n", "the session's file is untouched until the hand-back"

            listed = await server.call("subagents", {})
            assert [child["name"] for child in listed.structured_content["children"]] == ["worker"]
            assert text_of(listed) == text_of(spawned).splitlines()[0]

            waiting = anyio.Event()
            said: list[str | None] = []

            async def on_wait(progress: float, total: float | None, message: str | None) -> None:
                said.append(message)
                waiting.set()

            async with anyio.create_task_group() as group:
                scope = anyio.CancelScope()

                async def collect() -> None:
                    with scope:
                        await server.call("collect", {"timeout_ms": 60_000}, progress_callback=on_wait)
                    assert scope.cancelled_caught, "the collect ended before it was cancelled"

                group.start_soon(collect)
                with anyio.fail_after(DEADLINE_S):
                    await waiting.wait()
                scope.cancel()  # the client sends notifications/cancelled
            running = r"waiting for children for \d+\.\d s: 0 of 1 ended; running: worker"
            assert re.fullmatch(running, said[0] or ""), said
            await eventually(lambda: "collect: cancelled by the client" in server.stderr, "the cancel")
            (still,) = (await server.call("subagents", {})).structured_content["children"]
            assert still["status"] == "running", "cancelling a collect never ends a child"

            reports: list[str | None] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                reports.append(message)
                go.touch()

            collected = await server.call("collect", {"names": ["worker"]}, progress_callback=on_progress)
            assert reports, "a collect that lasts reports its progress"
            (report,) = collected.structured_content["reports"]
            assert (report["name"], report["status"], report["error"]) == ("worker", "answered", None)
            assert report["answer"]["edited"] == ["a.txt"]
            handback = report["handback"]
            assert (handback["status"], handback["paths_taken"], handback["conflicts"]) == ("done", ["a.txt"], [])
            assert (cwd / "a.txt").read_text() == "a by the child\n", "the child's change was handed back"
            answer = json.dumps(report["answer"])
            assert text_of(collected).splitlines() == [
                "worker: answered",
                f"  answer: {answer}",
                "  handed back: 1 path taken, 0 conflicts",
                "    took a.txt",
            ]

            (ended,) = (await server.call("subagents", {})).structured_content["children"]
            assert (ended["status"], ended["handback"]) == ("answered", handback)
            assert text_of(await server.call("subagents", {})).splitlines()[1:] == [
                "  handed back: 1 path taken, 0 conflicts",
                "    took a.txt",
            ]
            again = await server.call("spawn", {"name": "worker", "code": "1"})
            assert again.is_error
            assert text_of(again).startswith("child_exists: ")
            only_diagnostics(server.stderr)

    run(scenario)


def test_mcp_remote_call_calls_a_kernel_function_and_answers_its_typed_errors(world: DaemonEnv) -> None:
    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            nothing = await server.call("remote_call", {"name": "add", "args": {"a": 2, "b": 3}})
            assert nothing.structured_content == {"error": {"kind": "not_running", "message": ANY_TEXT, "reason": None}}
            defined = "@rlm.remote\ndef add(a: int, b: int) -> int:\n    'Add two integers.'\n    return a + b"
            await server.text("ipython", {"code": defined})
            added = await server.call("remote_call", {"name": "add", "args": {"a": 2, "b": 3}})
            assert not added.is_error
            assert added.structured_content == {"result": 5}
            assert text_of(added) == "5"
            wrong = await server.call("remote_call", {"name": "add", "args": {"a": "two"}})
            assert not wrong.is_error, "a failed call is an answer the model reads"
            assert wrong.structured_content["error"]["kind"] == "failed"
            assert text_of(wrong).startswith("remote failed (bad_arguments): ")
            unknown = await server.call("remote_call", {"name": "nope"})
            assert unknown.structured_content["error"]["kind"] == "unknown"
            refused = await server.call("remote_call", {"name": "add", "arguments": {}})
            assert refused.is_error
            assert "arguments" in text_of(refused)

    run(scenario)


class _AnyText(str):
    """Equal to any string (a message whose words are not what the test checks)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    __hash__ = str.__hash__


ANY_TEXT = _AnyText()


def test_mcp_logs_a_project_setting_that_would_loosen_the_sandbox(world: DaemonEnv) -> None:
    """The session starts with the user's policy; the server's stderr names the file and the key refused."""
    project = workdir(world)
    (project / ".eukhe").mkdir()
    (project / ".eukhe" / "settings.json").write_text(json.dumps({"sandbox": {"mode": "off"}}))

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(project)) as server:
            said = [line for line in server.stderr.splitlines() if "would loosen the sandbox" in line]
            assert said and "sandbox.mode" in said[0], server.stderr
            assert str(project / ".eukhe" / "settings.json") in said[0]
            only_diagnostics(server.stderr)

    run(scenario)


def test_mcp_says_once_how_to_tighten_a_network_that_is_on(world: DaemonEnv) -> None:
    """A session whose network is on: one diagnostic line names `--network allowlist`; with an allowlist, none."""
    project = workdir(world)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(project)) as server:
            said = [line for line in server.stderr.splitlines() if "--network allowlist" in line]
            assert len(said) == 1, server.stderr
            only_diagnostics(server.stderr)
        async with mcp_server(world, "--cwd", str(project), "--network", "allowlist") as server:
            assert "--network allowlist" not in server.stderr, server.stderr

    run(scenario)
