"""A child whose end cannot be recorded (a full disk, for real: RLIMIT_FSIZE in a child process) still ends: its
delete answers instead of waiting forever (bench/soak.py's ENOSPC faults)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import asyncio, resource, signal, sys
from pathlib import Path
from eukhe.api import Session
from eukhe.errors import EukheError

root, work = Path(sys.argv[1]), Path(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

async def main():
    session = await Session.create(work, root=root)
    await session.children.spawn("slow", "import time\ntime.sleep(600)")
    (report,) = await session.children.collect(["slow"], timeout_ms=1_000)
    assert report.status == "running", report
    resource.setrlimit(resource.RLIMIT_FSIZE, (10, hard))  # every journal is past this: each commit fails
    try:
        try:
            await asyncio.wait_for(session.children.delete("slow"), 60)
        except EukheError as error:
            print("delete refused:", error.code)  # its retire could not be made durable: a typed answer
        except TimeoutError:
            sys.exit("children.delete hung: the child's end record failed and nothing woke its waiters")
        assert [row.name for row in session.children.list()] == []
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        await session.close()

asyncio.run(main())
"""


@pytest.mark.real
def test_a_child_whose_end_cannot_be_recorded_still_ends_and_its_delete_answers(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "root"), str(tmp_path / "work")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
