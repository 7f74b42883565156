"""A daemon worker reaps what its confined jobs and kernels leave: bwrap exits as soon as the sandbox's pid 1 has
reported the command's status, so pid 1 ends after it, as a child of the worker (a subreaper). Unreaped, each
confined job and each ended kernel left one zombie for the worker's whole life: a long session ran into the
machine's process limit."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tests.real.conftest import DaemonEnv
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

JOBS = 4


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
