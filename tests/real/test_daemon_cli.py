"""The daemon's CLI and protocol end to end (issue 4): --json keys, errors, protocol faults, start/stop, restarts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eukhe.daemon.client import DaemonClient
from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real

OUTPUT_KEYS = {"text", "bytes_kept", "bytes_dropped", "lines_kept", "lines_dropped", "notice", "artifact"}


@pytest.fixture
def project(world: DaemonEnv) -> Path:
    path = world.root / "project"
    path.mkdir()
    return path


def test_every_command_answers_the_json_keys_scripts_rely_on(world: DaemonEnv, project: Path) -> None:
    created = world.json("session", "create", "--cwd", str(project))
    session = created["id"]
    assert isinstance(session, str)
    assert session in [s["id"] for s in world.json("session", "list")["sessions"]]

    settled = world.json("bash", "--session", session, "--", "echo hello; exit 3")
    assert settled["status"] == "settled"
    assert settled["exit_code"] == 3
    assert set(settled) >= OUTPUT_KEYS
    assert settled["text"] == "hello\n"

    detached = world.json("bash", "--session", session, "--budget-ms", "200", "--", "echo started; sleep 60")
    assert detached["status"] == "detached"
    assert set(detached) >= OUTPUT_KEYS
    job = detached["job"]

    jobs = world.json("jobs", "list", "--session", session)
    assert isinstance(jobs, list)
    assert {"id", "status", "command"} <= set(jobs[0])
    assert {j["id"]: j["status"] for j in jobs}[job] == "running"
    assert {j["id"]: j["command"] for j in jobs}[job] == "echo started; sleep 60"

    waited = world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "100")
    assert waited["status"] == "detached"
    assert "exit_code" not in waited
    assert "killed" not in waited

    shown = world.json("session", "show", session)
    assert "leaf" in shown
    assert all({"id", "parent", "kind"} <= set(entry) for entry in shown["entries"])
    assert shown["leaf"] == shown["entries"][-1]["id"]
    leaf = shown["leaf"]

    cancelled = world.json("jobs", "cancel", "--session", session, job)
    assert cancelled["status"] == "settled"
    assert cancelled["killed"] is True

    quick = world.json("bash", "--session", session, "--", "true")
    assert quick["exit_code"] == 0
    waited = world.json("jobs", "wait", "--session", session, quick["job"])
    assert waited["status"] == "settled"
    assert waited["exit_code"] == 0

    later = world.json("bash", "--session", session, "--budget-ms", "0", "--", "sleep 60")["job"]
    navigated = world.json("tree", "navigate", "--session", session, leaf)
    assert navigated["stoppedJobs"] + navigated["stoppingJobs"] == [later]
    forked = world.json("tree", "fork", "--session", session, "none")
    assert {"id", "stoppedJobs", "stoppingJobs"} <= set(forked)
    assert forked["id"] != session
    assert world.json("session", "show", forked["id"])["entries"] == []
    # The original session reopens in its own worker.
    assert world.json("session", "show", session)["id"] == session


def test_errors_are_one_json_object_and_a_non_zero_exit(world: DaemonEnv, project: Path) -> None:
    code, error = world.json_error("session", "create", "--cwd", str(project / "nope"))
    assert code == 1
    assert error == {"error": "working_dir_error", "message": "working directory is gone"}
    (project / "file").write_text("x")
    _, error = world.json_error("session", "create", "--cwd", str(project / "file"))
    assert error["message"] == "working directory is not a directory"
    _, error = world.json_error("session", "create", "--cwd", "")
    assert error["message"] == "a session needs a working directory"
    code, error = world.json_error("session", "create")
    assert code == 2
    assert set(error) == {"error", "message"}
    _, error = world.json_error("session", "show", "no-such-session")
    assert error["error"] == "no_such_session"
    session = world.json("session", "create", "--cwd", str(project))["id"]
    _, error = world.json_error("jobs", "wait", "--session", session, "job-nope")
    assert error["error"] == "unknown_job"
    _, error = world.json_error("tree", "navigate", "--session", session, "no-entry")
    assert set(error) == {"error", "message"}
    code, error = world.json_error("bash", "--session", session)
    assert code == 2


def test_malformed_and_oversized_requests_get_an_error_and_the_connection_keeps_working(
    world: DaemonEnv, project: Path
) -> None:
    world.json("daemon", "start")
    session = world.json("session", "create", "--cwd", str(project))["id"]
    with DaemonClient.connect(world.socket) as client:
        for raw, code in (
            (b"not json\n", "malformed"),
            (b"[1,2]\n", "malformed"),
            (b'{"v":1,"op":"ping"}\n', "malformed"),
            (b'{"v":2,"id":7,"op":"ping"}\n', "unsupported_version"),
            (b'{"v":1,"id":8,"op":"nope"}\n', "unknown_op"),
            (b'{"v":1,"id":9,"op":"bash","args":{"session":"' + session.encode() + b'"}}\n', "bad_args"),
            (b"\xff\xfe\n", "malformed"),
            (b"x" * (2 << 20) + b"\n", "oversized"),
        ):
            client.send_raw(raw)
            reply = client.read_reply()
            assert reply["ok"] is False
            assert reply["error"]["code"] == code
        assert client.call("ping")["pong"] is True
        assert client.call("session.ping", {"session": session})["session"] == session
    assert world.json("daemon", "status")["running"] is True


def test_the_cli_starts_the_daemon_on_first_use_and_stop_stops_it(world: DaemonEnv) -> None:
    assert world.cli("daemon", "status").returncode == 3
    assert world.json("session", "list") == {"sessions": []}
    status = world.json("daemon", "status")
    assert status["socket"] == str(world.socket)
    stopped = world.json("daemon", "stop")
    assert stopped["stopped"] is True
    assert stopped["running"] is False
    assert not world.socket.exists()
    assert world.json("daemon", "stop")["stopped"] is False


def test_daemon_socket_option_overrides_the_default(world: DaemonEnv, tmp_path: Path) -> None:
    custom = world.root / "c" / "d.sock"
    started = world.json("daemon", "start", "--daemon-socket", str(custom))
    assert started["socket"] == str(custom)
    assert custom.exists()
    assert not world.socket.exists()
    assert world.json("daemon", "status", "--daemon-socket", str(custom))["running"] is True
    world.json("daemon", "stop", "--daemon-socket", str(custom))
    assert not custom.exists()


def test_daemon_run_serves_in_the_foreground_until_sigterm(world: DaemonEnv) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "eukhe.cli.main", "daemon", "run"],
        env=world.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not world.socket.exists() and time.monotonic() < deadline:
            assert process.poll() is None
            time.sleep(0.02)  # waiting for the real socket to appear, bounded
        assert world.json("daemon", "status")["pid"] == process.pid
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert not world.socket.exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()


def test_a_restart_in_a_gone_working_dir_fails_with_the_spec_text(world: DaemonEnv, project: Path) -> None:
    session = world.json("session", "create", "--cwd", str(project))["id"]
    world.json("daemon", "stop")
    shutil.rmtree(project)
    _, error = world.json_error("session", "show", session)
    assert error["message"] == "working directory is gone"
    project.mkdir()
    assert world.json("session", "show", session)["id"] == session


def test_watch_streams_a_snapshot_then_job_updates(world: DaemonEnv, project: Path) -> None:
    session = world.json("session", "create", "--cwd", str(project))["id"]
    job = world.json(
        "bash", "--session", session, "--budget-ms", "0", "--", "for i in 1 2 3; do echo $i; sleep 0.2; done"
    )["job"]
    done = world.cli("watch", "--session", session, "--max-events", "2", "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "snapshot"
    assert events[1]["type"] == "job_update"
    assert events[1]["id"] == job
    world.json("jobs", "wait", "--session", session, job)


def test_worker_processes_run_in_the_session_working_dir(world: DaemonEnv, project: Path) -> None:
    session = world.json("session", "create", "--cwd", str(project))["id"]
    (worker,) = world.json("daemon", "status")["workers"]
    assert worker["session"] == session
    assert os.readlink(f"/proc/{worker['pid']}/cwd") == str(project)
    assert world.json("bash", "--session", session, "--", "pwd")["text"] == f"{project}\n"


def test_a_watch_ends_in_the_worker_when_its_client_leaves(world: DaemonEnv, project: Path) -> None:
    session = world.json("session", "create", "--cwd", str(project))["id"]
    with DaemonClient.connect(world.socket) as watcher:
        watcher.send_raw(b'{"v":1,"id":1,"op":"watch","args":{"session":"' + session.encode() + b'"}}\n')
        assert watcher.read_reply()["event"]["type"] == "snapshot"
        with DaemonClient.connect(world.socket) as client:
            assert client.call("session.ping", {"session": session})["watchers"] == 1
    deadline = time.monotonic() + 10
    with DaemonClient.connect(world.socket) as client:
        while client.call("session.ping", {"session": session})["watchers"] and time.monotonic() < deadline:
            time.sleep(0.02)  # the worker notices the closed stream; bounded wait
        assert client.call("session.ping", {"session": session})["watchers"] == 0


def test_a_relative_cwd_is_the_callers_directory(world: DaemonEnv, project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "session", "create", "--cwd", "project", "--json"],
        env=world.env,
        cwd=world.root,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["cwd"] == str(project)
