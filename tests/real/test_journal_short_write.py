"""A commit torn by a full disk in a live journal: the next commit still reads whole (S1 store; S2 "A tool call" 1).

The disk is filled for real: a child process lowers its own file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored), so the
kernel writes part of a commit and refuses the rest, exactly as on a full disk. RLIMIT_FSIZE refuses a write past an
offset whatever the file's size, so it tears a commit inside the zeros the journal wrote ahead (the limit just past
the commits' end) as well as one that needs more space than the zeros hold (the limit at the file's size: the zeros
the journal would write ahead are refused too, and the commit is torn past them).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eukhe.records.journal import EntryRecord
from eukhe.store.journal import read_journal

CHILD = r"""
import os, resource, signal, sys
from pathlib import Path
from eukhe.records.journal import EntryRecord
from eukhe.store.journal import Journal, JournalError

def entry(entry_id, content=""):
    return EntryRecord(id=entry_id, parent=None, kind="user", content=content)

path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
journal = Journal(path)
journal.commit([entry("a")])
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
inside = sys.argv[2] == "inside"
resource.setrlimit(resource.RLIMIT_FSIZE, ((journal.end if inside else os.path.getsize(path)) + 10, hard))
try:
    journal.commit([entry("b", "x" * (100 if inside else 3 * os.path.getsize(path)))])
except JournalError:
    pass
else:
    sys.exit("the commit past the limit did not fail")
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
journal.commit([entry("c")])
journal.close()
"""


@pytest.mark.real
@pytest.mark.parametrize("where", ["inside", "past"])
def test_a_commit_after_a_torn_write_reads_whole(tmp_path: Path, where: str) -> None:
    path = tmp_path / "main.jsonl"
    subprocess.run([sys.executable, "-c", CHILD, str(path), where], check=True, timeout=60)
    read = read_journal(path)
    assert [r.id for c in read.commits for r in c.records if isinstance(r, EntryRecord)] == ["a", "c"]
    assert [c.seq for c in read.commits] == [1, 2]
    assert len(read.diagnostics) == 1
    assert "unreadable" in read.diagnostics[0].reason
