"""Ctrl-C on a waiting `eukhe bash` or `eukhe ipython`: the first SIGINT cancels the job through its owner (the
whole group ends, or the cell is interrupted), the CLI says so and exits 130 after the end; a second SIGINT leaves at
once and names the job and how to wait for it or cancel it."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real


def start_cli(world: DaemonEnv, *args: str) -> subprocess.Popen[str]:
    """The CLI as a user starts it; the world ends it with the test, on every path (nothing leaks into a later test)."""
    return world.start_cli(*args)


def running_job(world: DaemonEnv, session: str) -> str:
    """The one running job of the session, once it runs (bounded polling of a real event)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        running = [j for j in world.json("jobs", "list", "--session", session)["jobs"] if j["status"] == "running"]
        if running:
            return str(running[0]["id"])
        time.sleep(0.05)
    raise AssertionError("no job started")


def read_stderr_until(process: subprocess.Popen[str], needle: str, timeout: float = 20) -> str:
    """stderr as it comes, until it holds `needle`."""
    assert process.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.1)
        if ready:
            chunk = os.read(process.stderr.fileno(), 4096).decode()
            if not chunk:
                break
            seen += chunk
    assert needle in seen, seen
    return seen


def sleeps_left(world: DaemonEnv, marker: str) -> list[int]:
    found = []
    for pid in world.processes():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(pid)
    return found


@pytest.fixture
def session(world: DaemonEnv) -> str:
    project = world.root / "project"
    project.mkdir()
    return str(world.json("session", "create", "--cwd", str(project))["id"])


def test_ctrl_c_on_a_waiting_bash_cancels_its_job_and_exits_130_after_the_end(world: DaemonEnv, session: str) -> None:
    process = start_cli(world, "bash", "--session", session, "--", "sleep 61 & sleep 62; wait")
    job = running_job(world, session)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, (out, err)
    assert f"cancelling job {job}" in err
    assert f"cancelled: job {job} ended (killed)" in err
    (row,) = [j for j in world.json("jobs", "list", "--session", session)["jobs"] if j["id"] == job]
    assert (row["status"], row["killed"]) == ("ended", True)
    assert sleeps_left(world, "sleep 6") == []  # the whole group ended, not only its leader


def test_a_second_ctrl_c_leaves_at_once_and_names_the_job(world: DaemonEnv, session: str) -> None:
    # The group ignores SIGTERM: its cancel waits the kill grace (2 s) for SIGKILL.
    process = start_cli(world, "bash", "--session", session, "--", "trap '' TERM; sleep 63 & sleep 64; wait")
    job = running_job(world, session)
    process.send_signal(signal.SIGINT)
    read_stderr_until(process, f"cancelling job {job}")
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=10)
    assert process.returncode == 130
    assert f"left job {job}" in rest
    assert f"eukhe jobs wait --session {session} {job}" in rest
    assert f"eukhe jobs cancel --session {session} {job}" in rest
    waited = world.json("jobs", "wait", "--session", session, job)
    assert (waited["status"], waited.get("killed")) == ("settled", True)
    assert sleeps_left(world, "sleep 6") == []


def test_ctrl_c_on_a_waiting_ipython_interrupts_the_cell(world: DaemonEnv, session: str) -> None:
    assert world.json("ipython", "--session", session, "-c", "kept = 41")["status"] == "settled"
    started = world.root / "project" / "cell-started"
    process = start_cli(
        world, "ipython", "--session", session, "-c", "import time\nopen('cell-started', 'w').close()\ntime.sleep(60)"
    )
    deadline = time.monotonic() + 20
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the cell runs: bounded polling of a real event
    assert started.exists()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, (out, err)
    # The cell runs before its job's id reaches the CLI: the Ctrl-C may come in between, and the cancel (which
    # names the request) reaches the cell all the same. The end's line names the job either way.
    assert re.search(r"cancelling job (job-\S+|\(its id not heard yet\))", err), err
    assert "cancelled: job job-" in err
    after = world.json("ipython", "--session", session, "-c", "kept + 1")
    assert after["result"] == "42"  # interrupted, not killed: the namespace stays


def ignoring_and_blocking_sigint() -> None:
    """What a CLI inherits when a shell starts it as a background job, or under nohup: SIGINT ignored (and here also
    blocked)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def test_ctrl_c_cancels_the_job_even_when_the_cli_inherited_sigint_ignored_and_blocked(
    world: DaemonEnv, session: str
) -> None:
    process = world.spawned.add(
        subprocess.Popen(
            [sys.executable, "-m", "eukhe.cli.main", "bash", "--session", session, "--", "sleep 65 & sleep 66; wait"],
            env=world.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=ignoring_and_blocking_sigint,  # noqa: PLW1509 - the child's own signal state, before exec
        )
    )
    job = running_job(world, session)
    with open(f"/proc/{process.pid}/status") as status:
        ignored = next(line for line in status if line.startswith("SigIgn:"))
    assert int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)) == 0  # the CLI set its own handler
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, (out, err)
    assert f"cancelled: job {job} ended (killed)" in err
    assert sleeps_left(world, "sleep 6") == []
