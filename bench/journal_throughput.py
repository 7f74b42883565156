"""Journal throughput (issue 3, bench b): settled tool calls per second on the session journal (each call: a start
commit and a settle commit, each one write + fsync), against appending the same records to SQLite in WAL mode with
synchronous=FULL (one transaction per commit), measured in the same run on the same filesystem.

    uv run python bench/journal_throughput.py            # 2000 calls
    uv run python bench/journal_throughput.py --calls 200

Prints both rates and the ratio journal / SQLite (target >= 1).
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

from eukhe.core.limits import DEFAULT_TRUNCATION
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


async def journal_run(directory: Path, calls: int) -> tuple[float, list[Commit]]:
    """Settle `calls` tool calls on a real Harness and journal; answer the seconds taken and the commits made."""
    ledger = Ledger(Journal(directory / "main.jsonl"), Trees(), [])
    harness = Harness(ledger, lambda: DEFAULT_TRUNCATION, make_private_dirs(directory / "artifacts"))
    harness.register(ToolRegistration("small", SmallArgs, execute))
    commits: list[Commit] = []
    ledger.journal.observers.append(commits.append)
    started = time.perf_counter()
    for index in range(calls):
        await harness.call("small", {"n": index})
    elapsed = time.perf_counter() - started
    ledger.close()
    return elapsed, commits


def sqlite_run(directory: Path, commits: list[Commit]) -> float:
    """Append the same records to SQLite (WAL, synchronous=FULL), one transaction per commit."""
    connection = sqlite3.connect(directory / "journal.sqlite", isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("CREATE TABLE records (seq INTEGER, position INTEGER, record TEXT)")
        rows = [
            [
                (commit.seq, position, msgspec.json.encode(record).decode())
                for position, record in enumerate(commit.records)
            ]
            for commit in commits
        ]
        started = time.perf_counter()
        for batch in rows:
            connection.execute("BEGIN")
            connection.executemany("INSERT INTO records VALUES (?, ?, ?)", batch)
            connection.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="tool calls to settle (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="alternate the two this many times (shared machines)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary dir)")
    args = parser.parse_args()
    per_round = max(1, args.calls // args.rounds)
    ours = theirs = 0.0
    commit_count = 0
    ratios: list[float] = []
    for _ in range(args.rounds):
        # Alternating the two in rounds spreads the noise of a shared disk evenly over both.
        with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
            base = Path(scratch)
            ours_round, commits = asyncio.run(journal_run(base, per_round))
            theirs_round = sqlite_run(base, commits)
        ours += ours_round
        theirs += theirs_round
        commit_count += len(commits)
        ratios.append(theirs_round / ours_round)
    calls = per_round * args.rounds
    ours_rate = calls / ours
    theirs_rate = calls / theirs
    print(f"calls: {calls} in {args.rounds} rounds, commits: {commit_count}")
    print(f"journal (one write + fdatasync per commit): {ours_rate:,.0f} settled calls/s")
    print(f"SQLite WAL synchronous=FULL (same records): {theirs_rate:,.0f} settled calls/s")
    print(f"per-round ratios: {', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
    print(f"ratio journal / SQLite: {ours_rate / theirs_rate:.2f} (target >= 1)")


if __name__ == "__main__":
    main()
