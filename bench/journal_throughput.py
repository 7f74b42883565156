"""Journal throughput: settled tool calls per second on the session journal (each
call: a start commit and a settle commit, each one write + fdatasync), against appending the same records to SQLite
in WAL mode with synchronous=FULL (one transaction per commit), measured in the same run on the same filesystem.

    uv run python bench/journal_throughput.py            # 2000 calls
    uv run python bench/journal_throughput.py --calls 200 --block 20

The two are measured in alternating blocks (`--block` calls on the journal, then the same commits on SQLite), in
`--rounds` rounds, each on a fresh journal and a fresh database: on a disk other programs share, the noise of any
moment falls on both. Each side keeps its file open for the whole round, as a session keeps its journal.

Prints both rates, the ratio journal / SQLite (target >= 1) and the per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import msgspec

from bench.verdict import Target, report
from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.harness.harness import Harness
from eukhe.harness.tool import ToolExecutionApi, ToolRegistration
from eukhe.private_fs import make_private_dirs
from eukhe.records.base import Record
from eukhe.records.journal import Commit
from eukhe.store.journal import Journal
from eukhe.store.ledger import Ledger
from eukhe.store.tree import Trees


class SmallArgs(Record):
    """The small tool's arguments."""

    n: int


async def execute(args: SmallArgs, api: ToolExecutionApi) -> bytes:
    """A small tool: some output, a warning, usage, a progress publication."""
    api.output(b"result line\n" * 4)
    api.diagnostic("note")
    api.usage(tokens=12)
    api.publish_progress()
    return b"done\n"


class SqliteJournal:
    """The same records in SQLite (WAL, synchronous=FULL), one transaction per commit."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("CREATE TABLE records (seq INTEGER, position INTEGER, record TEXT)")

    def append(self, commits: list[Commit]) -> float:
        """Append each commit as one transaction; the seconds taken (the rows are encoded before the clock runs)."""
        rows = [
            [
                (commit.seq, position, msgspec.json.encode(record).decode())
                for position, record in enumerate(commit.records)
            ]
            for commit in commits
        ]
        started = time.perf_counter()
        for batch in rows:
            self.connection.execute("BEGIN")
            self.connection.executemany("INSERT INTO records VALUES (?, ?, ?)", batch)
            self.connection.execute("COMMIT")
        return time.perf_counter() - started

    def close(self) -> None:
        self.connection.close()


async def run_round(directory: Path, calls: int, block: int) -> tuple[float, float, int]:
    """Settle `calls` tool calls on a real Harness and journal, `block` at a time, each block's commits then
    appended to SQLite: (journal seconds, SQLite seconds, commits)."""
    ledger = Ledger(Journal(directory / "main.jsonl"), Trees(), [])
    harness = Harness(ledger, lambda: DEFAULT_TRUNCATION, make_private_dirs(directory / "artifacts"))
    harness.register(ToolRegistration("small", SmallArgs, execute))
    sqlite = SqliteJournal(directory / "journal.sqlite")
    commits: list[Commit] = []
    ledger.journal.observers.append(commits.append)
    ours = theirs = 0.0
    count = 0
    try:
        for low in range(0, calls, block):
            commits.clear()
            started = time.perf_counter()
            for index in range(low, min(calls, low + block)):
                await harness.call("small", {"n": index})
            ours += time.perf_counter() - started
            count += len(commits)
            theirs += sqlite.append(list(commits))
    finally:
        ledger.close()
        sqlite.close()
    return ours, theirs, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="tool calls to settle (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each on fresh files (default 5)")
    parser.add_argument("--block", type=int, default=25, help="calls per alternating block (default 25)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary dir)")
    args = parser.parse_args()
    per_round = max(1, args.calls // args.rounds)
    ours = theirs = 0.0
    commit_count = 0
    ratios: list[float] = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
            ours_round, theirs_round, commits = asyncio.run(run_round(Path(scratch), per_round, max(1, args.block)))
        ours += ours_round
        theirs += theirs_round
        commit_count += commits
        ratios.append(theirs_round / ours_round)
    calls = per_round * args.rounds
    ours_rate = calls / ours
    theirs_rate = calls / theirs
    print(f"calls: {calls} in {args.rounds} rounds of blocks of {args.block}, commits: {commit_count}")
    print(f"journal (one write + fdatasync per commit): {ours_rate:,.0f} settled calls/s")
    print(f"SQLite WAL synchronous=FULL (same records): {theirs_rate:,.0f} settled calls/s")
    print(f"per-round ratios: {', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
    print(f"ratio journal / SQLite: {ours_rate / theirs_rate:.2f} (target >= 1)")
    report([Target("journal / SQLite WAL, settled calls/s", ours_rate / theirs_rate, ">=", 1, "x")])


if __name__ == "__main__":
    main()
