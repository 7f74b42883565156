"""What a bash run's shell leaves running goes on as a job of its own (docs/jobs.md, "What the shell leaves runs on
as a job"), unconfined and confined, in a Session, through the CLI and through MCP: a dev server a second call
reaches, `cmd & echo $!`, a daemon that left the group, a rewind that stops the one started after its target and
keeps the other, the session's close, and the output it writes after the shell's exit, counted in its own job.

Every wait is on a real event (a port accepting, a job's end, a process gone), bounded by a deadline only a hang
reaches; no process is left on the host (tagged processes, found by the tag in their environment).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from eukhe.calls.texts import answer_text, left_line
from eukhe.core.job import Exited, Killed
from eukhe.jobs.bash import BashOptions
from eukhe.records.jobs import Settled
from eukhe.records.sandbox import SandboxPolicy
from eukhe.session.session import Session
from tests.real.conftest import DaemonEnv
from tests.real.sandboxes import SANDBOX_PYTHON
from tests.real.test_confined_jobs_leave_no_zombie import zombies_of_worker
from tests.real.test_mcp_server import eventually, mcp_server, workdir
from tests.real.test_mcp_server import run as run_mcp
from tests.real.test_sandbox_jobs import tagged, until
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

MODES = ("off", "workspace_write")
DEADLINE_S = 60.0
"""How long a server may take to accept, a job to end: only a hang reaches it."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepting(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def server_command(tag: str, port: int) -> str:
    """The dev-server scenario: a server started in the background with its output redirected, then an echo."""
    return (
        f"export SANDBOX_TEST_TAG={tag}; nohup {SANDBOX_PYTHON} -m http.server {port} --bind 127.0.0.1 "
        f">srv.log 2>&1 & echo started"
    )


async def session_in(tmp_path: Path, mode: str) -> Session:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return await Session.create(
        cwd,
        root=tmp_path / "sessions",
        sandbox=SandboxPolicy(mode="off") if mode == "off" else SandboxPolicy(),
        bash_options=BashOptions(kill_grace_ms=1_000),
    )


async def left_of(session: Session, command: str) -> tuple[Settled, str]:
    """Run `command` (its shell leaves a process running): its answer, and the job that took what it left."""
    answer = await session.execute_bash_and_wait(command, 30_000)
    assert isinstance(answer, Settled), answer
    assert answer.left_running is not None, answer
    return answer, answer.left_running


# ---------------------------------------------------------------------------------------------------------------------
# In a Session: unconfined and confined


@pytest.mark.parametrize("mode", MODES)
def test_a_dev_server_left_running_is_a_job_a_second_call_reaches_and_a_cancel_ends(tmp_path: Path, mode: str) -> None:
    need_tools("curl")
    tag, port = uuid.uuid4().hex, free_port()

    async def scenario() -> None:
        session = await session_in(tmp_path, mode)
        try:
            answer, left = await left_of(session, server_command(tag, port))
            assert (answer.exit_code, answer.killed, answer.output.text) == (0, False, "started\n")
            assert answer_text(answer) == "started\n[exit 0]" + left_line(left)
            assert left in answer_text(answer) and "jobs_cancel" in answer_text(answer)
            rows = {row.id: row for row in session.jobs.list()}
            assert rows[left].status == "running" and rows[answer.job or ""].status == "ended"
            await until(lambda: accepting(port), DEADLINE_S)
            listing = await session.execute_bash_and_wait(f"curl -s http://127.0.0.1:{port}/", 30_000)
            assert isinstance(listing, Settled) and listing.exit_code == 0
            assert "srv.log" in listing.output.text  # the server lists the working directory
            assert listing.left_running is None
            ended = await session.jobs.cancel(left)
            assert isinstance(ended, Settled) and ended.killed
            assert tagged(tag) == []
            assert not accepting(port)
        finally:
            await session.close()
        assert tagged(tag) == []

    asyncio.run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_cmd_and_echo_its_pid_answers_at_once_and_the_process_goes_on_until_cancelled(
    tmp_path: Path, mode: str
) -> None:
    tag = uuid.uuid4().hex

    async def scenario() -> None:
        session = await session_in(tmp_path, mode)
        try:
            answer, left = await left_of(session, f"export SANDBOX_TEST_TAG={tag}; sleep 300 & echo $!")
            assert answer.exit_code == 0 and answer.output.text.strip().isdigit()
            (pid,) = tagged(tag)
            if mode == "off":
                assert pid == int(answer.output.text)  # the same process: no namespace between
            job = session.job_table.get(left)
            assert job is not None and job.running
            ended = await session.jobs.cancel(left)
            assert isinstance(ended, Settled) and ended.killed and job.end == Killed()
            assert tagged(tag) == []
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_output_the_left_processes_write_is_their_jobs_counted_and_it_ends_with_the_last_of_them(
    tmp_path: Path, mode: str
) -> None:
    """The shell's job keeps what was written before its end, the left job every byte after: kept + dropped of the
    two is every byte the run wrote. The left job ends, exit 0, when its last process ends on its own."""
    lines = 50_000
    after = "".join(f"{n}\n" for n in range(1, lines + 1)) + "tail\n"

    async def scenario() -> None:
        session = await session_in(tmp_path, mode)
        try:
            go = session.cwd / "go"
            os.mkfifo(go)
            answer, left = await left_of(session, f"(read _ < go; seq 1 {lines}; echo tail) & echo started")
            assert answer.output.bytes_kept + answer.output.bytes_dropped == len("started\n")
            fd = os.open(go, os.O_WRONLY)  # the left process waits on the fifo: it opens at once
            os.write(fd, b"\n")
            os.close(fd)
            ended = await session.jobs.wait(left)
            assert isinstance(ended, Settled), ended
            assert (ended.exit_code, ended.killed) == (0, False)
            assert ended.output.bytes_kept + ended.output.bytes_dropped == len(after)
            assert ended.output.lines_kept + ended.output.lines_dropped == lines + 1
            assert ended.output.artifact is not None and Path(ended.output.artifact).read_text() == after
            job = session.job_table.get(left)
            assert job is not None and job.end == Exited(0)
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_a_rewind_stops_the_left_job_started_after_its_target_and_keeps_the_one_before_then_close_ends_it(
    tmp_path: Path, mode: str
) -> None:
    before, after = uuid.uuid4().hex, uuid.uuid4().hex

    async def scenario() -> None:
        session = await session_in(tmp_path, mode)
        try:
            session.append("user", "start one")
            _, kept = await left_of(session, f"export SANDBOX_TEST_TAG={before}; sleep 300 & echo one")
            target = session.append("assistant", "started one")
            _, orphan = await left_of(session, f"export SANDBOX_TEST_TAG={after}; sleep 301 & echo two")
            rewound = await session.navigate_tree(target.id)
            assert rewound.stopped_jobs == [orphan]
            assert rewound.stopping_jobs == []
            assert tagged(after) == []
            assert len(tagged(before)) == 1
            rows = {row.id: row for row in session.jobs.list()}
            assert rows[kept].status == "running" and rows[orphan].killed
        finally:
            await session.close()
        assert tagged(before) == []  # the session's close ended it

    asyncio.run(scenario())


def test_a_confined_shell_runs_its_command_as_without_the_keeper(tmp_path: Path) -> None:
    """The keeper is the shell's own EXIT trap: the command sees `bash -c` as ever (its $0, its exit code, a signal's
    code, its own EXIT trap, the user's BASH_ENV sourced) and none of the keeper's environment."""

    async def scenario() -> None:
        session = await session_in(tmp_path, "workspace_write")
        user_env = session.cwd / "user_env.sh"  # where the sandbox sees it (its /tmp is its own)
        user_env.write_text("USER_ENV_READ=yes\n")
        os.environ["BASH_ENV"] = str(user_env)
        try:
            seen = await session.execute_bash_and_wait(
                'echo "$0 ${USER_ENV_READ-} ${BASH_ENV-} ${EUKHE_KEEPER-unset} ${EUKHE_USER_BASH_ENV-unset}"', 30_000
            )
            assert isinstance(seen, Settled)
            assert seen.output.text == f"bash yes {user_env} unset unset\n"
            os.environ["BASH_ENV"] = str(session.cwd / "missing.sh")  # bash says nothing of a missing one
            quiet = await session.execute_bash_and_wait("echo ok", 30_000)
            assert isinstance(quiet, Settled)
            assert quiet.output.text == "ok\n"
            for command, code, text in (
                ("echo hi; exit 3", 3, "hi\n"),
                ("kill -TERM $$", 143, ""),
                ("trap 'echo mine' EXIT; echo start", 0, "start\nmine\n"),
                ("echo )", 2, "bash: -c: line 1: syntax error near unexpected token `)'\nbash: -c: line 1: `echo )'\n"),
            ):
                answer = await session.execute_bash_and_wait(command, 30_000)
                assert isinstance(answer, Settled), answer
                assert (answer.exit_code, answer.output.text, answer.left_running) == (code, text, None), command
        finally:
            del os.environ["BASH_ENV"]
            await session.close()

    asyncio.run(scenario())


# ---------------------------------------------------------------------------------------------------------------------
# Through the daemon: the CLI and MCP


@pytest.mark.parametrize("mode", MODES)
def test_the_cli_dev_server_scenario(world: DaemonEnv, mode: str) -> None:
    need_tools("curl")
    tag, port = uuid.uuid4().hex, free_port()
    cwd = workdir(world)
    session = world.json("session", "create", "--cwd", str(cwd), "--sandbox", mode)["id"]
    ran = world.cli("bash", "--session", session, "--", server_command(tag, port))
    assert (ran.returncode, ran.stdout) == (0, "started\n"), ran
    found = re.search(r"go on as job (job-[0-9a-f]+): `eukhe jobs wait --session", ran.stderr)
    assert found, ran.stderr
    left = found.group(1)
    rows = {row["id"]: row for row in world.json("jobs", "list", "--session", session)["jobs"]}
    assert rows[left]["status"] == "running"
    wait_for(lambda: accepting(port))
    listing = world.cli("bash", "--session", session, "--", f"curl -s http://127.0.0.1:{port}/")
    assert listing.returncode == 0 and "srv.log" in listing.stdout, listing
    cancelled = world.json("jobs", "cancel", "--session", session, left)
    assert cancelled["killed"] is True
    assert tagged(tag) == []
    assert not accepting(port)


@pytest.mark.parametrize("mode", MODES)
def test_a_server_that_daemonizes_out_of_the_group_is_tracked_by_the_worker_and_cancelled(
    world: DaemonEnv, mode: str
) -> None:
    """`setsid -f` forks, makes a session of its own and leaves its parent to exit: the server is in no group of the
    job and its parent is gone. The daemon's worker (a child subreaper) inherits it unconfined, the sandbox's pid 1
    confined: either way it is the left job's, and a cancel ends it."""
    need_tools("setsid")
    tag, port = uuid.uuid4().hex, free_port()
    cwd = workdir(world)
    session = world.json("session", "create", "--cwd", str(cwd), "--sandbox", mode)["id"]
    command = (
        f"export SANDBOX_TEST_TAG={tag}; setsid -f {SANDBOX_PYTHON} -m http.server {port} --bind 127.0.0.1 "
        f">srv.log 2>&1 </dev/null; echo daemonized"
    )
    answer = world.json("bash", "--session", session, "--", command)
    assert (answer["exit_code"], answer["output"]["text"]) == (0, "daemonized\n"), answer
    left = answer["left_running"]
    assert left is not None, answer
    wait_for(lambda: accepting(port))
    (server,) = tagged(tag)
    assert os.getsid(server) != os.getsid(os.getpid())
    cancelled = world.json("jobs", "cancel", "--session", session, left)
    assert cancelled["killed"] is True
    assert tagged(tag) == []
    assert zombies_of_worker(world, session) == []  # the worker reaped the server it inherited


def test_the_mcp_dev_server_scenario(world: DaemonEnv) -> None:
    need_tools("curl")
    tag, port = uuid.uuid4().hex, free_port()

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world))) as server:
            text = await server.text("bash", {"command": server_command(tag, port)})
            found = re.fullmatch(
                r"started\n\[exit 0\]\n\[processes it left running go on as job (job-[0-9a-f]+):.*\]", text
            )
            assert found, text
            left = found.group(1)
            listed = await server.text("jobs_list", {})
            assert re.search(rf"{left}\s+bash\s+running", listed), listed
            await eventually(lambda: accepting(port), f"the server on port {port}", DEADLINE_S)
            listing = await server.text("bash", {"command": f"curl -s http://127.0.0.1:{port}/"})
            assert "srv.log" in listing and listing.endswith("[exit 0]"), listing
            cancelled = await server.text("jobs_cancel", {"job": left})
            assert "killed" in cancelled, cancelled
            assert tagged(tag) == []

    run_mcp(scenario)


def wait_for(condition: Callable[[], bool]) -> None:
    """Wait for a real event (a port accepting) from a synchronous test, bounded by the deadline."""

    async def waiting() -> None:
        await until(condition, DEADLINE_S)

    asyncio.run(waiting())
