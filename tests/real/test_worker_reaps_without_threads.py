"""A daemon worker learns of its jobs' ends through pidfds, not a waitpid thread per job (asyncio's default before
3.12): threads cost a start per job on the call's path (bench/mcp_roundtrip.py) and memory per running job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eukhe.daemon.client import DaemonClient
from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_running_jobs_add_no_thread_to_their_worker(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    with DaemonClient.connect(world.socket) as client:
        (worker,) = [row["pid"] for row in client.call("status")["workers"] if row["session"] == session]
        client.call("bash", {"session": session, "command": "true"})  # whatever a first call starts, once
        before = threads_of(worker)
        jobs = [
            client.call("bash", {"session": session, "command": "sleep 30", "budget_ms": 0})["job"] for _ in range(5)
        ]
        try:
            assert threads_of(worker) == before
        finally:
            for job in jobs:
                client.call("jobs.cancel", {"session": session, "job": job})
