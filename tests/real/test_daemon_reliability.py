"""Reliability of the daemon: a worker or the supervisor killed with SIGKILL, and 20 clients at once."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eukhe.procs import children_of, group_alive
from tests.real.conftest import DaemonEnv, with_json

pytestmark = pytest.mark.real


def eventually(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    """Poll a real condition until it holds (returns its value), bounded by a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_long_job(world: DaemonEnv, session: str) -> tuple[str, int, list[int]]:
    """A detached job of two processes in its group, committed as a job node: (job id, worker pid, job groups)."""
    job = world.json("bash", "--session", session, "--budget-ms", "0", "--", "sleep 300 & sleep 301; wait")["job"]
    eventually(lambda: job in world.json("session", "show", session)["job_nodes"], "the job node to be committed")
    (worker,) = [w for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    worker_group = os.getpgid(worker["pid"])
    groups = eventually(
        lambda: sorted({g for _, g in children_of(worker["pid"]) if g != worker_group}), "the job's process group"
    )
    assert all(group_alive(g) for g in groups)
    return job, int(worker["pid"]), groups


def test_a_worker_killed_mid_job_is_reported_its_session_reopens_and_no_job_process_survives(
    world: DaemonEnv, tmp_path: Path
) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    _job, worker_pid, groups = start_long_job(world, session)
    os.kill(worker_pid, signal.SIGKILL)

    def reported() -> dict[str, Any] | None:
        for report in world.json("daemon", "status")["reports"]:
            if report["session"] == session and report["pid"] == worker_pid and "reopened" in report:
                return report
        return None

    report = eventually(reported, "the supervisor's report of the dead worker")
    assert report["event"] == "worker_died"
    assert report["exit"] == -signal.SIGKILL
    assert report["reopened"]["pid"] != worker_pid
    assert not any(group_alive(g) for g in groups), "a process of the killed job's group survived"
    shown = world.json("session", "show", session)
    assert shown["job_nodes"] == [], "the reopened session retired the leftover job node"
    assert shown["running_jobs"] == []
    assert "killed by signal 9" in world.log.read_text()
    # The reopened session works.
    assert world.json("bash", "--session", session, "--", "echo again")["output"]["text"] == "again\n"


def test_a_killed_supervisor_is_replaced_by_the_next_cli_call_and_sessions_reopen(
    world: DaemonEnv, tmp_path: Path
) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    _job, worker_pid, groups = start_long_job(world, session)
    old = world.json("daemon", "status")["pid"]
    os.kill(old, signal.SIGKILL)
    # The orphaned worker sees its stdin close, ends its session (and so its jobs), and exits.
    eventually(lambda: not alive(worker_pid), "the orphaned worker to exit")
    eventually(lambda: not any(group_alive(g) for g in groups), "the job's group to end")
    shown = world.json("session", "show", session)  # starts a fresh daemon, which reopens the session
    assert shown["id"] == session
    assert shown["job_nodes"] == []
    status = world.json("daemon", "status")
    assert status["pid"] != old
    assert [w["session"] for w in status["workers"]] == [session]
    assert world.json("bash", "--session", session, "--", "echo back")["output"]["text"] == "back\n"


def test_twenty_concurrent_clients_on_one_session_are_all_answered(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    clients = 20
    commands = [f"echo client-{i}" for i in range(clients)]
    processes = [world.start_cli(*with_json(["bash", "--session", session, "--", command])) for command in commands]
    readers = [
        world.start_cli(*with_json(args))
        for args in (["jobs", "list", "--session", session], ["session", "show", session])
    ]

    for i, process in enumerate(processes):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        answer = json.loads(out)
        assert answer["status"] == "settled"
        assert answer["output"]["text"] == f"client-{i}\n"
    for process in readers:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    jobs = world.json("jobs", "list", "--session", session)["jobs"]
    assert sorted(j["command"] for j in jobs) == sorted(commands)
    assert all(j["status"] == "ended" and j["exit_code"] == 0 for j in jobs)

    def rows() -> list[str] | None:
        entries = world.json("session", "show", session)["entries"]
        found = sorted(e["content"]["command"] for e in entries if e["kind"] == "notice")
        return found if len(found) == clients else None

    assert eventually(rows, "every run's eukhe.bash row") == sorted(commands)


def test_concurrent_first_calls_start_exactly_one_daemon(world: DaemonEnv) -> None:
    processes = [world.start_cli("session", "list", "--json") for _ in range(6)]
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert json.loads(out) == {"sessions": []}

    def supervisors() -> list[int]:
        found = []
        for pid in world.processes():
            with contextlib.suppress(OSError):
                if b"eukhe.daemon.supervisor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
        return found

    # The daemons that lost the race find the socket's lock taken and exit by themselves.
    def only_one() -> list[int] | None:
        found = supervisors()
        return found if len(found) == 1 else None

    (winner,) = eventually(only_one, "one supervisor left")
    assert world.json("daemon", "status")["pid"] == winner


def test_a_session_an_old_worker_still_holds_is_not_opened_twice(world: DaemonEnv, tmp_path: Path) -> None:
    """A fresh daemon may start while a worker of the dead one still closes the session: the reopen waits for it."""
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("daemon", "stop")
    lock = os.open(world.agent_dir / "sessions" / session / "worker.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # stands for the old worker, still holding the session
        world.env["EUKHE_SESSION_LOCK_WAIT_MS"] = "300"
        _, error = world.json_error("session", "show", session)
        assert error["error"] == "session_busy"
    finally:
        os.close(lock)
    assert world.json("session", "show", session)["id"] == session
