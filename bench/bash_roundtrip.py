"""Benchmark: a bash job for `true`, started and awaited to its end, vs `subprocess.run(["bash", "-c",
"true"])` in the same run. Prints the mean of each and their ratio (target <= 1.5).

    uv run python bench/bash_roundtrip.py [--runs N] [--artifacts] [--command CMD]

`--artifacts` gives each job an artifact dir, as a session does (a job's output then goes to a spill file from its
first byte: `true` writes none, `--command 'echo started'` one line). `--command` replaces `true` in both.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.verdict import Target, report
from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.jobs import JobTable
from eukhe.jobs.bash import bash_and_wait
from eukhe.records.jobs import Settled


def baseline(runs: int, cwd: Path, command: str) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["bash", "-c", command], cwd=cwd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        times.append(time.perf_counter() - start)
    return times


async def jobs(runs: int, cwd: Path, command: str, artifacts: Path | None) -> list[float]:
    table = JobTable()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        answer = await bash_and_wait(
            command, cwd, truncation=DEFAULT_TRUNCATION, artifact_dir=artifacts, table=table, budget_ms=60_000
        )
        times.append(time.perf_counter() - start)
        assert isinstance(answer, Settled)
        assert answer.exit_code == 0
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--artifacts", action="store_true", help="give each job an artifact dir, as a session does")
    parser.add_argument("--command", default="true", help="what both run (default: true)")
    args = parser.parse_args()
    command = args.command
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        artifacts = cwd / "artifacts" if args.artifacts else None
        baseline(10, cwd, command)  # warm-up
        asyncio.run(jobs(10, cwd, command, artifacts))
        base: list[float] = []
        ours: list[float] = []
        for _ in range(4):  # interleave rounds so machine load hits both alike
            base += baseline(args.runs // 4, cwd, command)
            ours += asyncio.run(jobs(args.runs // 4, cwd, command, artifacts))
    b, o = statistics.median(base), statistics.median(ours)
    where = f", artifact dir {'yes' if artifacts else 'no'}"
    print(f"subprocess.run(bash -c {command!r}): median {b * 1000:.2f} ms over {len(base)} runs")
    print(f"bash job for {command!r}, to its end{where}: median {o * 1000:.2f} ms over {len(ours)} runs")
    print(f"ratio job / subprocess.run: {o / b:.2f} (target <= 1.5)")
    report([Target("bash job / subprocess.run, median", o / b, "<=", 1.5, "x")])


if __name__ == "__main__":
    main()
