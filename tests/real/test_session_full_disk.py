"""A session whose first commits fail (a full disk, for real: RLIMIT_FSIZE in a child) leaks no descriptor, on
create and on a reopen that must settle an interrupted call (S1 store; S2 "A tool call")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import asyncio, os, resource, signal, sys
from pathlib import Path
from eukhe.records.journal import CallStart, Checkpoint
from eukhe.store.journal import JournalError
from eukhe.session.session import Session

root, project = Path(sys.argv[1]), Path(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

def fds():
    return sorted(os.listdir("/proc/self/fd"))

async def main():
    session = await Session.create(project, root=root, session_id="s1")
    checkpoint = Checkpoint(artifact_dir=str(root), artifact_prefix="none", truncation="off")
    session.commit([CallStart(call="c1", tool="bash", args={}, checkpoint=checkpoint)])  # a crash leaves it running
    await session.close()
    before = fds()
    resource.setrlimit(resource.RLIMIT_FSIZE, (10, hard))  # below any commit, and below the journal s1 holds
    for attempt in (lambda: Session.create(project, root=root, session_id="s2"), lambda: Session.open("s1", root=root)):
        try:
            await attempt()
        except JournalError:
            pass
        else:
            sys.exit("a commit past the limit did not fail")
        assert fds() == before, (fds(), before)

asyncio.run(main())
"""


@pytest.mark.real
def test_a_session_whose_first_commit_fails_leaks_no_descriptor(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "root"), str(tmp_path / "project")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
