"""A commit torn by a full disk in a live journal: the next commit still reads whole (S1 store; S2 "A tool call" 1).

The disk is filled for real: a child process lowers its own file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored), so the
kernel writes part of a commit and refuses the rest, exactly as on a full disk.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eukhe.session.journal import read_journal

CHILD = r"""
import os, resource, signal, sys
from pathlib import Path
from eukhe.session.journal import Journal, JournalError

path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
journal = Journal(path)
journal.commit([{"t": "entry", "id": "a"}])
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 10, hard))
try:
    journal.commit([{"t": "entry", "id": "b", "pad": "x" * 100}])
except JournalError:
    pass
else:
    sys.exit("the commit past the limit did not fail")
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
journal.commit([{"t": "entry", "id": "c"}])
journal.close()
"""


@pytest.mark.real
def test_a_commit_after_a_torn_write_reads_whole(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, timeout=60)
    read = read_journal(path)
    assert [c.records[0]["id"] for c in read.commits] == ["a", "c"]
    assert [c.seq for c in read.commits] == [1, 2]
    assert len(read.diagnostics) == 1
    assert "unreadable" in read.diagnostics[0].reason
