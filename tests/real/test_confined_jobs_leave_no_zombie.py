"""A daemon worker reaps what its confined jobs leave: bwrap exits as soon as the sandbox's pid 1 has reported the
command's status, so pid 1 ends after it, as a child of the worker (a subreaper). Unreaped, each confined job left
one zombie for the worker's whole life: a long session ran into the machine's process limit."""

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
    (worker,) = [w["pid"] for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    zombies = [child.pid for child in psutil.Process(worker).children() if child.status() == psutil.STATUS_ZOMBIE]
    assert zombies == [], f"the worker keeps {len(zombies)} ended children of {JOBS} confined jobs"
