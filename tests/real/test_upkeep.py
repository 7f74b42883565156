"""Idle culling, session close and delete, and artifact collection under a real daemon (docs/daemon.md).

Culling is checked against the supervisor's own reports (`daemon status` lists what it culled): a session that must
stay is checked in the same pass that culls an idle control session created after it, so no test waits on wall time
for something not to happen. Settings are the user's `<agent dir>/settings.json`, re-read by the daemon every pass.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from eukhe.daemon.wire import encode_request
from eukhe.procs import children_of, group_alive
from tests.real.conftest import DaemonEnv
from tests.real.test_daemon_reliability import alive, eventually, start_long_job

pytestmark = pytest.mark.real


LONG_S = 3600
"""An idle timeout no test reaches: set while a test still looks at what a short one would cull."""


def configure(world: DaemonEnv, **settings: Any) -> None:
    world.agent_dir.mkdir(mode=0o700, exist_ok=True)
    (world.agent_dir / "settings.json").write_text(json.dumps(settings))


def culled(world: DaemonEnv, session: str, event: str = "session_culled") -> bool:
    return any(r["session"] == session and r["event"] == event for r in world.json("daemon", "status")["culled"])


def worker_pids(world: DaemonEnv) -> dict[str, int]:
    return {w["session"]: int(w["pid"]) for w in world.json("daemon", "status")["workers"]}


def test_a_culled_session_reopens_with_its_journal_and_jobs_intact(world: DaemonEnv, tmp_path: Path) -> None:
    configure(world, session_idle_timeout_s=LONG_S)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("bash", "--session", session, "--", "echo one")
    detached = world.json("bash", "--session", session, "--budget-ms", "0", "--", "sleep 0.2; echo two")
    world.json("jobs", "wait", "--session", session, detached["job"], "--timeout-ms", "10000")
    before = world.json("session", "show", session)
    pid = worker_pids(world)[session]
    configure(world, session_idle_timeout_s=0.3)  # only now: the worker looked at is the one culled
    eventually(lambda: culled(world, session), "the idle session to be culled")
    configure(world, session_idle_timeout_s=LONG_S)  # the reopened worker stays while the test looks at it
    assert session not in worker_pids(world)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    (report,) = [r for r in world.json("daemon", "status")["culled"] if r["session"] == session]
    assert report["pid"] == pid
    assert report["idle_s"] >= 0.3
    after = world.json("session", "show", session)  # reopens it in a fresh worker
    assert after["entries"] == before["entries"]
    assert after["leaf"] == before["leaf"]
    rows = [e["content"] for e in after["entries"] if e["kind"] == "notice"]
    assert [(r["command"], r["exit_code"], r["output"]["text"]) for r in rows] == [
        ("echo one", 0, "one\n"),
        ("sleep 0.2; echo two", 0, "two\n"),
    ]
    assert after["job_nodes"] == []
    assert worker_pids(world)[session] != pid
    assert world.json("bash", "--session", session, "--", "echo three")["output"]["text"] == "three\n"
    assert not any(r["session"] == session for r in world.json("daemon", "status")["reports"]), "not a death"


def test_culling_never_hits_a_running_job_a_busy_kernel_or_a_watcher(world: DaemonEnv, tmp_path: Path) -> None:
    # A session (or kernel) idle before its job, cell or watcher came may be culled, rightly: the short timeouts hold
    # only once each runs.
    configure(world, session_idle_timeout_s=LONG_S, kernel_idle_timeout_s=LONG_S)
    with_job = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    job, _, groups = start_long_job(world, with_job)
    with_cell = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    cell = world.json("ipython", "--session", with_cell, "--budget-ms", "0", "-c", "import time\ntime.sleep(300)")
    watched = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    watcher = socket.socket(socket.AF_UNIX)
    watcher.connect(str(world.socket))
    watcher.sendall(encode_request(1, "watch", {"session": watched}))
    assert b'"snapshot"' in watcher.recv(65536)  # the watch runs
    configure(world, session_idle_timeout_s=0.3, kernel_idle_timeout_s=0.3)
    try:
        kept = worker_pids(world)
        # A control session, idle from now: once it is culled, the pass that culled it looked at the others after
        # they had been idle (but for what keeps them) longer than it.
        control = world.json("session", "create", "--cwd", str(tmp_path))["id"]
        eventually(lambda: culled(world, control), "the idle control session to be culled")
        after = world.json("session", "create", "--cwd", str(tmp_path))["id"]
        eventually(lambda: culled(world, after), "a second control session to be culled (one more pass)")
        now = worker_pids(world)
        for session in (with_job, with_cell, watched):
            assert now[session] == kept[session], f"session {session} was culled"
            assert not culled(world, session) and not culled(world, session, "kernel_culled")
        assert all(group_alive(g) for g in groups)
        rows = {r["id"]: r["status"] for r in world.json("jobs", "list", "--session", with_job)["jobs"]}
        assert rows[job] == "running"
        cells = {r["id"]: r["status"] for r in world.json("jobs", "list", "--session", with_cell)["jobs"]}
        assert cells[cell["job"]] == "running", "the running cell's kernel was not culled"
    finally:
        watcher.close()
    # The watcher gone and nothing else live, the watched session is culled in turn.
    eventually(lambda: culled(world, watched), "the session to be culled once its watcher left")


def kernels_of(worker: int) -> list[int]:
    """The Python kernels a worker runs (its children running the stub)."""
    return [
        pid
        for pid, _ in children_of(worker)
        if b"eukhe_kernel" in Path(f"/proc/{pid}/cmdline").read_bytes() and alive(pid)
    ]


def test_an_idle_kernel_is_culled_and_then_its_session(world: DaemonEnv, tmp_path: Path) -> None:
    configure(world, kernel_idle_timeout_s=LONG_S, session_idle_timeout_s=0)  # sessions: never
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    code = "import threading\nlock = threading.Lock()\nx = 41\nx + 1"
    assert world.json("ipython", "--session", session, "-c", code)["result"] == "42"
    worker = worker_pids(world)[session]
    (kernel,) = kernels_of(worker)  # found before a short timeout can cull it
    configure(world, kernel_idle_timeout_s=0.2, session_idle_timeout_s=0)
    eventually(lambda: culled(world, session, "kernel_culled"), "the idle kernel to be culled")
    eventually(lambda: not alive(kernel), "the culled kernel to be gone")
    assert worker_pids(world)[session] == worker, "only the kernel was culled"
    # The next cell runs on a fresh kernel, which read the culled one's namespace snapshot: its variables and its
    # imports are back; a lock does not pickle, so it is not.
    configure(world, kernel_idle_timeout_s=LONG_S, session_idle_timeout_s=0)  # the fresh kernel stays to be seen
    answer = world.json("ipython", "--session", session, "-c", "(x, threading.__name__, 'lock' in globals())")
    assert answer["result"] == "(41, 'threading', False)", answer
    assert kernels_of(worker) not in ([], [kernel])
    configure(world, kernel_idle_timeout_s=0.2, session_idle_timeout_s=0.3)
    eventually(lambda: culled(world, session), "the session to be culled once its kernel was")
    events = [r["event"] for r in world.json("daemon", "status")["culled"] if r["session"] == session]
    assert events == ["kernel_culled", "kernel_culled", "session_culled"]


def test_a_kernel_is_never_culled_while_a_remote_call_runs_on_it(world: DaemonEnv, tmp_path: Path) -> None:
    """A @remote call in flight keeps its kernel busy: past the idle timeout it is not culled, and the call answers.
    Two guards hold it (the supervisor asks no worker with a request in flight; the worker's kernel counts its calls
    as work): each was removed once on purpose, and the test failed only with both gone."""
    configure(world, kernel_idle_timeout_s=LONG_S, session_idle_timeout_s=0)  # sessions: never
    release = tmp_path / "release"
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    code = (
        "import os, time\n"
        "@rlm.remote\n"
        "def wait_for(path: str) -> str:\n"
        "    open(path + '.started', 'w').close()\n"
        "    while not os.path.exists(path):\n"
        "        time.sleep(0.02)\n"
        "    return 'released'\n"
    )
    world.json("ipython", "--session", session, "-c", code)
    (kernel,) = kernels_of(worker_pids(world)[session])
    args = json.dumps({"path": str(release)})
    call = world.start_cli(
        "remote", "call", "--session", session, "wait_for", "--json", "--args", args, "--budget-ms", "60000"
    )
    started = tmp_path / "release.started"
    eventually(started.exists, "the call to run in the kernel")  # in flight before any short timeout holds
    configure(world, kernel_idle_timeout_s=0.3, session_idle_timeout_s=0)
    # A control kernel idle from now: once it is culled, then another, the passes that culled them looked at the
    # busy kernel after it was idle (but for its call) longer than its timeout.
    for _ in range(2):
        control = world.json("session", "create", "--cwd", str(tmp_path))["id"]
        world.json("ipython", "--session", control, "-c", "1")
        eventually(lambda control=control: culled(world, control, "kernel_culled"), "a control kernel culled")
    assert not culled(world, session, "kernel_culled")
    assert alive(kernel)
    release.touch()
    out, err = call.communicate(timeout=60)
    assert json.loads(out) == {"result": "released"}, err


def test_a_session_with_a_live_kernel_stays_when_kernels_are_never_culled(world: DaemonEnv, tmp_path: Path) -> None:
    configure(world, session_idle_timeout_s=0.3)  # kernel_idle_timeout_s: 0 by default, never
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("ipython", "--session", session, "-c", "y = 7")
    pid = worker_pids(world)[session]
    control = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    eventually(lambda: culled(world, control), "the idle control session to be culled")
    after = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    eventually(lambda: culled(world, after), "a second control session to be culled (one more pass)")
    assert worker_pids(world)[session] == pid
    assert world.json("ipython", "--session", session, "-c", "y")["result"] == "7"


def test_close_and_delete_refuse_while_jobs_run_and_force_kills_them(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]  # host pids
    job, _, groups = start_long_job(world, session)
    for command in ("close", "delete"):
        code, error = world.json_error("session", command, session)
        assert code != 0
        assert error["error"] == "session_has_jobs"
        assert error["details"]["jobs"] == [job]
        assert all(group_alive(g) for g in groups)
    assert (world.agent_dir / "sessions" / session).is_dir()
    closed = world.json("session", "close", session, "--force")
    assert closed == {"session": session, "was_open": True}
    assert not any(group_alive(g) for g in groups)
    assert session not in worker_pids(world)
    again = world.json("session", "close", session)
    assert again == {"session": session, "was_open": False}
    shown = world.json("session", "show", session)  # reopens: the killed job's node is retired
    assert shown["job_nodes"] == []

    # delete: its dir (journal, artifacts) and its workspaces go; a running job refuses it unless forced
    world.json("bash", "--session", session, "--", "seq 1 100000 >/dev/null; seq 1 30000")  # an artifact
    artifacts = list((world.agent_dir / "sessions" / session / "artifacts").iterdir())
    assert artifacts
    workspaces = world.agent_dir / "workspaces" / session / "child"
    workspaces.mkdir(parents=True)
    (workspaces / "copy.txt").write_text("a child's copy\n")
    job, _, groups = start_long_job(world, session)
    _, error = world.json_error("session", "delete", session)
    assert error["error"] == "session_has_jobs"
    assert workspaces.is_dir()
    deleted = world.json("session", "delete", session, "--force")
    assert deleted["session"] == session
    assert deleted["was_open"] is True
    assert sorted(deleted["removed"]) == sorted(
        [str(world.agent_dir / "sessions" / session), str(world.agent_dir / "workspaces" / session)]
    )
    assert not any(group_alive(g) for g in groups)
    assert not (world.agent_dir / "sessions" / session).exists()
    assert not (world.agent_dir / "workspaces" / session).exists()
    assert not any(path.exists() for path in artifacts)
    _, error = world.json_error("session", "show", session)
    assert error["error"] == "unknown_session"
    _, error = world.json_error("session", "delete", session)
    assert error["error"] == "unknown_session"
    assert session not in [s["id"] for s in world.json("session", "list")["sessions"]]


def test_gc_keeps_what_is_being_written_and_what_a_last_answer_names(world: DaemonEnv, tmp_path: Path) -> None:
    sessions = world.agent_dir / "sessions"
    named = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    first = world.json("bash", "--session", named, "--", "seq 1 40000")["output"]["artifact"]
    last = world.json("bash", "--session", named, "--", "seq 2 40001")["output"]["artifact"]
    writing = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    long = world.json("bash", "--session", writing, "--budget-ms", "0", "--", "seq 3 40002; echo written; sleep 300")

    def artifact_of_running_job() -> str | None:
        found = [p for p in (sessions / writing / "artifacts").iterdir() if long["job"] in p.name]
        return str(found[0]) if found and b"written" in found[0].read_bytes() else None

    written = eventually(artifact_of_running_job, "the running job's artifact")
    world.json("bash", "--session", writing, "--", "true")  # its last answer names nothing
    closed = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    stale = world.json("bash", "--session", closed, "--", "seq 4 40003")["output"]["artifact"]
    world.json("session", "close", closed)
    # Ages: `stale` 30 days old; the others one to four hours, oldest first: first, written, last.
    hour = 3600
    now = time.time()
    for path, age in ((stale, 30 * 24 * hour), (first, 4 * hour), (written, 3 * hour), (last, 2 * hour)):
        os.utime(path, (now - age, now - age))
    configure(world, artifact_max_total_bytes=1, artifact_max_age_days=7)

    planned = world.json("gc", "--dry-run")
    assert planned["dry_run"] is True
    assert [(r["path"], r["reason"]) for r in planned["removed"]] == [(stale, "age"), (first, "size")]
    assert all(Path(p).exists() for p in (stale, first, written, last))
    assert planned["kept_being_written"] == 1
    assert planned["kept_pinned"] >= 1

    report = world.json("gc")
    assert [(r["path"], r["reason"]) for r in report["removed"]] == [(stale, "age"), (first, "size")]
    assert report["bytes_freed"] == sum(r["bytes"] for r in report["removed"])
    assert not Path(stale).exists() and not Path(first).exists()
    assert Path(written).exists(), "an artifact still being written is kept"
    assert Path(last).exists(), "the artifact the last answer of an open session names is kept"
    assert world.json("daemon", "status")["last_gc"]["removed"] == report["removed"]

    # The job ends (its artifact is no longer written, and no last answer names it): the next collection takes it.
    world.json("jobs", "cancel", "--session", writing, long["job"])
    world.json("bash", "--session", writing, "--", "true")
    again = world.json("gc")
    assert [r["path"] for r in again["removed"]] == [written]
    assert Path(last).exists()


def test_the_supervisors_own_questions_to_workers_are_refused_from_a_client(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(world.socket))
        args = {"session": session, "session_idle_ms": 1, "kernel_idle_ms": 1}
        client.sendall(
            encode_request(1, "session.cull", args) + encode_request(2, "session.pins", {"session": session})
        )
        replies = b""
        while replies.count(b"\n") < 2:
            replies += client.recv(65536)
    for line in replies.splitlines():
        assert json.loads(line)["error"]["code"] == "unknown_op"
    assert session in worker_pids(world)


def test_a_daemon_collects_old_artifacts_when_it_starts(world: DaemonEnv, tmp_path: Path) -> None:
    """The retention policy runs at the daemon's start (then hourly): an artifact past `artifact_max_age_days`
    that no open session names goes, and `daemon status` says so."""
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("bash", "--session", session, "--", "seq 1 100000")  # an artifact
    (artifact,) = (world.agent_dir / "sessions" / session / "artifacts").iterdir()
    world.json("daemon", "stop")
    month_ago = time.time() - 30 * 86400
    os.utime(artifact, (month_ago, month_ago))
    world.json("daemon", "start")
    eventually(lambda: not artifact.exists(), "the old artifact to be collected at the daemon's start")
    last = world.json("daemon", "status")["last_gc"]
    assert [(row["path"], row["reason"]) for row in last["removed"]] == [(str(artifact), "age")]
