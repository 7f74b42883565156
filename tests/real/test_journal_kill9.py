"""A journal whose writer is killed -9 mid-stream, again and again (S1 store): every commit the
writer saw return is read back, in order, none torn; the zeros the dead writer wrote ahead are ignored; the next
writer goes on just past the last commit; a clean close leaves no zeros.

Each child reopens the journal (as a session reopen does: the next seq is read from it), commits in a loop (some
commits larger than the zeros written ahead, so the file grows mid-stream) and prints each seq once its commit
returned (written and fdatasynced). The parent kills it at a different point each time.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eukhe.records.journal import EntryRecord
from eukhe.store.journal import Journal, read_journal

pytestmark = pytest.mark.real

CHILD = r"""
import sys
from pathlib import Path
from eukhe.records.journal import EntryRecord
from eukhe.store.journal import Journal, read_journal

path = Path(sys.argv[1])
commits = read_journal(path).commits if path.exists() else ()
journal = Journal(path, next_seq=commits[-1].seq + 1 if commits else 1)
index = 0
while True:
    size = 90_000 if index % 97 == 13 else 40 + index % 300
    done = journal.commit([EntryRecord(id=f"e{journal.next_seq}", parent=None, kind="user", content="x" * size)])
    print(done.seq, flush=True)
    index += 1
"""


def run_and_kill(path: Path, after: int) -> int:
    """Run a writer on `path`, kill it -9 once it reported `after` commits; the last seq it reported."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    last = 0
    try:
        assert child.stdout is not None
        for _ in range(after):
            line = child.stdout.readline()
            assert line, "the writer ended before it was killed"
            last = int(line)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        # What it reported after `after` (between its last read line and the kill) counts too.
        for line in child.stdout:
            last = int(line)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    return last


def test_every_commit_a_killed_writer_saw_return_reads_back_and_the_next_writer_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "main.jsonl"
    rng = random.Random(14)
    reported = 0
    for _ in range(4):
        reported = run_and_kill(path, rng.randrange(50, 400))
        read = read_journal(path)
        seqs = [commit.seq for commit in read.commits]
        assert seqs == list(range(1, len(seqs) + 1))  # in order, none lost between
        assert seqs[-1] >= reported  # every commit it saw return (one more may have landed before the kill)
        assert read.diagnostics == ()  # a kill -9 never leaves half of a write; the zeros are no line
        for commit in read.commits:
            (record,) = commit.records
            assert isinstance(record, EntryRecord)
            assert record.id == f"e{commit.seq}"
    size = path.stat().st_size
    journal = Journal(path, next_seq=len(read_journal(path).commits) + 1)
    assert journal.end < size  # the dead writer's zeros are still there; the next commit goes before them
    journal.commit([EntryRecord(id="last", parent=None, kind="user", content="end")])
    journal.close()
    data = path.read_bytes()
    assert data.endswith(b"\n")  # a clean close cut the zeros off
    read = read_journal(path)
    assert read.diagnostics == ()
    assert [c.seq for c in read.commits] == list(range(1, len(read.commits) + 1))
