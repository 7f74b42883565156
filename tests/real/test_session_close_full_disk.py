"""A session closed on a full disk still kills its jobs, its running call's included (the soak once found a job
alive after its session's close on a full disk; the close now runs every step whatever failed before it, and the
worker and the supervisor end what a closed worker left)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from eukhe.procs import group_alive
from tests.real.process_support import end_job_group, job_group

CHILD = r"""
import asyncio, resource, signal, sys
from pathlib import Path
from eukhe.api import SandboxPolicy, Session

root, work, marker = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

async def main():
    session = await Session.create(work, root=root, sandbox=SandboxPolicy(mode="off"))
    command = f"echo $$ > {marker}; exec sleep 600"
    call = asyncio.ensure_future(session.execute_bash_and_wait(command, 600_000))  # a call still running
    while not marker.exists() or not marker.read_text().strip():
        await asyncio.sleep(0.01)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10, hard))  # every journal is past this: each commit fails
    try:
        await session.close()
        print("closed")
    except Exception as error:
        print("close raised:", type(error).__name__, error)
    call.cancel()

asyncio.run(main())
"""


@pytest.mark.real
def test_a_session_closed_on_a_full_disk_still_kills_its_jobs(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    marker = tmp_path / "pid"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "root"), str(tmp_path / "work"), str(marker)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    group = int(marker.read_text())
    left = job_group(group)  # None once the close ended it, as it should
    try:
        deadline = time.monotonic() + 10
        while group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(group), f"the job outlived its session's close: {done.stdout} {done.stderr[-2000:]}"
    finally:
        end_job_group(left)
