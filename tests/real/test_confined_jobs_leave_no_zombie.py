"""A daemon worker reaps what its confined jobs and kernels leave: bwrap exits as soon as the sandbox's pid 1 has
reported the command's status, so pid 1 ends after it, as a child of the worker (a subreaper). Unreaped, each
confined job and each ended kernel left one zombie for the worker's whole life: a long session ran into the
machine's process limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.real.conftest import DaemonEnv
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

JOBS = 4
DEADLINE_S = 60.0
"""How long pid 1 may take to end after bwrap: only a hang reaches it."""


def test_a_worker_keeps_no_zombie_of_its_confined_jobs(world: DaemonEnv, tmp_path: Path) -> None:
    need_tools("bwrap")
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "workspace_write")["id"]
    for number in range(JOBS):
        ran = world.json("bash", "--session", session, "--", f"echo {number}")
        assert ran["exit_code"] == 0, ran
    assert zombies_of_worker(world, session) == [], f"ended children of {JOBS} confined jobs"


def test_a_worker_keeps_no_zombie_of_its_ended_confined_kernels(world: DaemonEnv, tmp_path: Path) -> None:
    need_tools("bwrap")
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "workspace_write")["id"]
    for _ in range(2):  # each cell's kernel dies; the next cell starts a fresh one
        assert world.json("ipython", "--session", session, "-c", "1 + 1")["result"] == "2"
        died = world.cli("ipython", "--session", session, "-c", "import os; os._exit(3)")
        assert "KernelDiedError" in died.stdout + died.stderr, died
    assert world.json("ipython", "--session", session, "-c", "2 + 2")["result"] == "4"
    assert zombies_of_worker(world, session) == [], "ended children of 2 confined kernels"


def zombies_of_worker(world: DaemonEnv, session: str) -> list[int]:
    (worker,) = [w["pid"] for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    return [child.pid for child in psutil.Process(worker).children() if child.status() == psutil.STATUS_ZOMBIE]


REPORT_READ_LATE = """
import asyncio, os, subprocess, sys, time
from eukhe.daemon.orphans import become_subreaper
from eukhe.sandbox.group import SandboxGroup

assert become_subreaper()
loop = asyncio.new_event_loop()
group = SandboxGroup(loop)
argv = ["bwrap", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        "--info-fd", str(group.write_end), "true"]
bwrap = subprocess.Popen(argv, pass_fds=(group.write_end,))
group.started()  # the loop never runs: the job ended before it read bwrap's report
assert bwrap.wait() == 0
deadline = time.monotonic() + float(sys.argv[1])
while not group.reap():
    assert time.monotonic() < deadline, f"pid 1 ({group.pgid}) not reaped"
    time.sleep(0.01)
print("reaped", group.pgid)
"""


def test_a_confined_jobs_pid_1_is_reaped_when_the_loop_had_not_read_bwraps_report(tmp_path: Path) -> None:
    """A quick job on a busy host: bwrap reported pid 1 and exited before the worker's loop read the report, and pid
    1 may have ended by then too. The job's end reads the report itself and reaps pid 1 all the same."""
    need_tools("bwrap")
    done = subprocess.run(
        [sys.executable, "-c", REPORT_READ_LATE, str(DEADLINE_S)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith("reaped "), done.stderr
