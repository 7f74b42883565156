"""Workers forked by the warm fork server: each starts in its session's directory with the daemon's
environment, in a session of its own, as the supervisor's child; a worker that dies takes only its own session's
jobs; a fork server that dies is started again; `EUKHE_WORKER_START=exec` starts workers the plain way."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eukhe import mounts
from eukhe.daemon.spawning import ForkServer
from eukhe.procs import group_alive
from eukhe.records.daemon import WorkerReady
from tests.real.conftest import DaemonEnv
from tests.real.test_daemon_reliability import alive, eventually, start_long_job

pytestmark = pytest.mark.real


def worker_of(world: DaemonEnv, session: str) -> dict[str, Any]:
    (worker,) = [w for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    return worker


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_forked_worker_starts_in_its_sessions_directory_with_the_daemons_environment(
    world: DaemonEnv, tmp_path: Path
) -> None:
    world.env["EUKHE_TEST_MARK"] = "marked-ä"  # the daemon's environment (it starts with the CLI's)
    project = tmp_path / "project"
    project.mkdir()
    session = world.json("session", "create", "--cwd", str(project))["id"]
    status = world.json("daemon", "status")
    assert status["fork_server"] is not None
    worker = worker_of(world, session)
    pid = int(worker["pid"])
    assert os.readlink(f"/proc/{pid}/cwd") == str(project)
    assert parent_of(pid) == status["pid"], "a forked worker is the supervisor's child"
    assert os.getsid(pid) == pid, "a forked worker leads a session of its own"
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "eukhe-worker"
    answer = world.json("bash", "--session", session, "--", 'pwd; echo "$EUKHE_TEST_MARK"')
    assert answer["output"]["text"] == f"{project}\nmarked-ä\n"
    # The fork server is not its parent; the workers of two sessions are two processes.
    other = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    assert worker_of(world, other)["pid"] != pid


def test_a_worker_killed_takes_only_its_own_sessions_jobs(world: DaemonEnv, tmp_path: Path) -> None:
    doomed = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    spared = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    _, doomed_pid, doomed_groups = start_long_job(world, doomed)
    spared_job, spared_pid, spared_groups = start_long_job(world, spared)
    os.kill(doomed_pid, signal.SIGKILL)
    eventually(lambda: not any(group_alive(g) for g in doomed_groups), "the killed worker's job groups to end")
    eventually(
        lambda: any(r["session"] == doomed and "reopened" in r for r in world.json("daemon", "status")["reports"]),
        "the dead worker's session to be reopened",
    )
    assert alive(spared_pid), "another session's worker survived"
    assert all(group_alive(g) for g in spared_groups), "another session's job survived"
    rows = world.json("jobs", "list", "--session", spared)["jobs"]
    assert [(r["id"], r["status"]) for r in rows] == [(spared_job, "running")]
    assert worker_of(world, spared)["pid"] == spared_pid


def test_a_worker_killed_or_failing_to_start_leaks_no_fd_in_the_supervisor(world: DaemonEnv, tmp_path: Path) -> None:
    """Each worker's stdin pipe is closed when it dies or fails to start, not only when it is stopped (found by the
    soak: the supervisor's fds grew with every worker killed -9, and with every worker that could not start)."""
    world.env["EUKHE_SESSION_LOCK_WAIT_MS"] = "100"  # a worker gives up on a held session at once
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    supervisor = world.json("daemon", "status")["pid"]

    def pipes() -> int:
        fds = Path(f"/proc/{supervisor}/fd")
        return sum(1 for fd in fds.iterdir() if os.readlink(fd).startswith("pipe:"))

    before = pipes()
    for _ in range(3):
        pid = int(worker_of(world, session)["pid"])
        os.kill(pid, signal.SIGKILL)
        eventually(lambda pid=pid: not alive(pid), "the worker to die")
        assert world.json("bash", "--session", session, "--", "echo back")["output"]["text"] == "back\n"
    assert pipes() == before
    # A worker that cannot open its session (another process holds it) fails at start: its pipe goes with it.
    held = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("session", "close", held)
    with (world.agent_dir / "sessions" / held / "worker.lock").open("rb+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for _ in range(3):
            _, error = world.json_error("session", "show", held)
            assert error["error"] == "session_busy", error
    assert pipes() == before


def test_a_killed_fork_server_is_started_again(world: DaemonEnv, tmp_path: Path) -> None:
    first = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    server = world.json("daemon", "status")["fork_server"]
    assert server is not None
    os.kill(server, signal.SIGKILL)
    eventually(lambda: not alive(server), "the fork server to die")
    assert world.json("bash", "--session", first, "--", "echo still")["output"]["text"] == "still\n"
    second = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    assert world.json("bash", "--session", second, "--", "echo fresh")["output"]["text"] == "fresh\n"
    third = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    status = world.json("daemon", "status")
    assert status["fork_server"] not in (None, server), "a new fork server runs"
    assert parent_of(int(worker_of(world, third)["pid"])) == status["pid"]


def test_with_exec_workers_start_as_fresh_pythons(world: DaemonEnv, tmp_path: Path) -> None:
    world.env["EUKHE_WORKER_START"] = "exec"
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    status = world.json("daemon", "status")
    assert status["fork_server"] is None
    pid = int(worker_of(world, session)["pid"])
    assert b"eukhe.daemon.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert world.json("bash", "--session", session, "--", "echo plain")["output"]["text"] == "plain\n"


def test_a_fork_cancelled_mid_exchange_leaves_no_answer_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller cancelled while the fork server answers (a client's `cancel`, a client gone) must not leave that
    answer on the socket: the next fork read it as its own and paired another worker's pid with its pipes (found by
    the soak: "worker X serves session Y" while X served another session)."""
    agent = tmp_path / "agent"
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    daemon = tmp_path / "daemon.sock"

    async def scenario() -> None:
        server = ForkServer()
        await server.start(daemon)
        workers: list[int] = []
        try:
            first = asyncio.ensure_future(server.fork(None, str(tmp_path), tmp_path / "w1.sock", daemon))
            while not server._lock.locked():  # the exchange is under way: sent, its answer not read yet
                await asyncio.sleep(0)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            second = await server.fork(None, str(tmp_path), tmp_path / "w2.sock", daemon)
            workers.append(second.pid)
            ready = msgspec.json.decode(await asyncio.wait_for(second.ready_line(), 60), type=WorkerReady)
            assert ready.pid == second.pid, "the second fork got the first fork's answer"
            assert ready.socket == str(tmp_path / "w2.sock")
        finally:
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await server.stop()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 120))
    finally:  # a killed worker leaves its session's /tmp tmpfs for a reopen or a delete, which this test has not
        mounts.release_below(tmp_path)
