"""The daemon's CLI and protocol end to end: --json keys, errors, protocol faults, start/stop, restarts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

from eukhe.daemon.client import DaemonClient
from eukhe.daemon.wire import MAX_LINE_READ_BYTES
from eukhe.records.cli import CliError, DaemonStopped
from eukhe.records.daemon import DaemonStatus, SessionCreated, SessionList, SessionShow
from eukhe.records.jobs import CallAnswer, Detached, JobList, Rewound, Settled
from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real

T = TypeVar("T")


def typed(kind: Any, value: Any) -> Any:
    """A CLI --json answer, decoded strictly as its record (an unknown or missing key fails the test)."""
    return msgspec.convert(value, type=kind)


@pytest.fixture
def project(world: DaemonEnv) -> Path:
    path = world.root / "project"
    path.mkdir()
    return path


def test_every_command_answers_its_record_in_snake_case(world: DaemonEnv, project: Path) -> None:
    created = typed(SessionCreated, world.json("session", "create", "--cwd", str(project)))
    session = created.id
    listed = typed(SessionList, world.json("session", "list"))
    assert session in [s.id for s in listed.sessions]

    settled = typed(CallAnswer, world.json("bash", "--session", session, "--", "echo hello; exit 3"))
    assert isinstance(settled, Settled)
    assert (settled.exit_code, settled.killed, settled.output.text) == (3, False, "hello\n")

    detached = typed(
        CallAnswer, world.json("bash", "--session", session, "--budget-ms", "200", "--", "echo started; sleep 60")
    )
    assert isinstance(detached, Detached)
    job = detached.job

    jobs = typed(JobList, world.json("jobs", "list", "--session", session)).jobs
    assert {j.id: j.status for j in jobs}[job] == "running"
    assert {j.id: j.command for j in jobs}[job] == "echo started; sleep 60"

    waited = typed(CallAnswer, world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "100"))
    assert isinstance(waited, Detached)

    shown = typed(SessionShow, world.json("session", "show", session))
    assert shown.leaf == shown.entries[-1].id
    assert shown.entries[-1].content["notice"] == "eukhe.bash"
    assert shown.entries[-1].content["exit_code"] == 3
    leaf = shown.leaf

    cancelled = typed(CallAnswer, world.json("jobs", "cancel", "--session", session, job))
    assert isinstance(cancelled, Settled)
    assert cancelled.killed is True

    quick = typed(CallAnswer, world.json("bash", "--session", session, "--", "true"))
    assert isinstance(quick, Settled)
    assert quick.exit_code == 0
    assert quick.job is not None
    waited = typed(CallAnswer, world.json("jobs", "wait", "--session", session, quick.job))
    assert isinstance(waited, Settled)
    assert waited.exit_code == 0

    later = world.json("bash", "--session", session, "--budget-ms", "0", "--", "sleep 60")["job"]
    navigated = typed(Rewound, world.json("tree", "navigate", "--session", session, leaf))
    assert navigated.stopped_jobs + navigated.stopping_jobs == [later]
    forked = typed(Rewound, world.json("tree", "fork", "--session", session, "none"))
    assert (forked.parent, forked.leaf) == (session, None)
    assert forked.session != session
    assert world.json("session", "show", forked.session)["entries"] == []
    # The original session reopens in its own worker.
    assert world.json("session", "show", session)["id"] == session
    typed(DaemonStatus, world.json("daemon", "status"))
    typed(DaemonStopped, world.json("daemon", "stop"))


def test_errors_are_one_json_object_and_a_non_zero_exit(world: DaemonEnv, project: Path) -> None:
    code, error = world.json_error("session", "create", "--cwd", str(project / "nope"))
    assert code == 1
    assert error == {
        "error": "working_dir_error",
        "message": "working directory is gone",
        "field": "args.cwd",
        "details": None,
    }
    (project / "file").write_text("x")
    _, error = world.json_error("session", "create", "--cwd", str(project / "file"))
    assert error["message"] == "working directory is not a directory"
    _, error = world.json_error("session", "create", "--cwd", "")
    assert error["message"] == "a session needs a working directory"
    code, error = world.json_error("session", "create")
    assert code == 2
    typed(CliError, error)
    _, error = world.json_error("session", "show", "no-such-session")
    assert error["error"] == "unknown_session"
    session = world.json("session", "create", "--cwd", str(project))["id"]
    _, error = world.json_error("jobs", "wait", "--session", session, "job-nope")
    assert error["error"] == "unknown_job"
    _, error = world.json_error("tree", "navigate", "--session", session, "no-entry")
    assert typed(CliError, error).error == "unknown_entry"
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
            (b"x" * (MAX_LINE_READ_BYTES + 1) + b"\n", "oversized"),
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
    process = world.start_cli("daemon", "run", stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not world.socket.exists() and time.monotonic() < deadline:
        assert process.poll() is None
        time.sleep(0.02)  # waiting for the real socket to appear, bounded
    assert world.json("daemon", "status")["pid"] == process.pid
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    assert not world.socket.exists()


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
    assert events[1]["job"]["id"] == job
    world.json("jobs", "wait", "--session", session, job)


def test_worker_processes_run_in_the_session_working_dir(world: DaemonEnv, project: Path) -> None:
    session = world.json("session", "create", "--cwd", str(project))["id"]
    (worker,) = world.json("daemon", "status")["workers"]
    assert worker["session"] == session
    assert os.readlink(f"/proc/{worker['pid']}/cwd") == str(project)
    assert world.json("bash", "--session", session, "--", "pwd")["output"]["text"] == f"{project}\n"


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


def test_an_unknown_or_misspelled_field_is_refused_by_name_for_every_op(world: DaemonEnv, project: Path) -> None:
    from tests.unit.test_schemas import VALID

    world.json("daemon", "start")
    session = world.json("session", "create", "--cwd", str(project))["id"]
    with DaemonClient.connect(world.socket) as client:
        for number, (op, valid) in enumerate(sorted(VALID.items())):
            args = {**valid, "bogus_field": 1}
            if "session" in args:
                args["session"] = session
            client.send_raw(json.dumps({"v": 1, "id": number, "op": op, "args": args}).encode() + b"\n")
            reply = client.read_reply()
            assert reply["id"] == number
            assert reply["ok"] is False, op
            assert reply["error"]["code"] == "bad_args", op
            assert reply["error"]["field"] == "args.bogus_field", op
        for op in ("bash", "ipython"):
            args = {**VALID[op], "session": session, "budgetMs": 5}
            args.pop("budget_ms")
            client.send_raw(json.dumps({"v": 1, "id": op, "op": op, "args": args}).encode() + b"\n")
            error = client.read_reply()["error"]
            assert error["field"] == "args.budgetMs"
            assert "did you mean budget_ms?" in error["message"]
        assert client.call("session.ping", {"session": session})["session"] == session


def test_a_line_sent_during_a_watch_ends_it_with_its_reply_then_is_answered(world: DaemonEnv, project: Path) -> None:
    session = world.json("session", "create", "--cwd", str(project))["id"]
    with DaemonClient.connect(world.socket) as client:
        client.send_raw(b'{"v":1,"id":"w","op":"watch","args":{"session":"' + session.encode() + b'"}}\n')
        assert client.read_reply()["event"]["type"] == "snapshot"
        client.send_raw(b'{"v":1,"id":"p","op":"ping","args":{}}\n')
        replies = []
        while len(replies) < 2:
            reply = client.read_reply()
            if "event" not in reply:
                replies.append(reply)
        assert [(r["id"], r["ok"]) for r in replies] == [("w", True), ("p", True)]
        assert replies[0]["result"] == {"ended": True}
        assert client.call("session.ping", {"session": session})["session"] == session  # the connection goes on
