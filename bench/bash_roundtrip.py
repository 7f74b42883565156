"""Benchmark: a bash job for `true`, started and awaited to its end, vs `subprocess.run(["bash", "-c",
"true"])` in the same run. Prints the mean of each and their ratio (target <= 1.5).

    uv run python bench/bash_roundtrip.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.jobs import JobTable
from eukhe.jobs.bash import bash_and_wait
from eukhe.records.jobs import Settled


def baseline(runs: int, cwd: Path) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], cwd=cwd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        times.append(time.perf_counter() - start)
    return times


async def jobs(runs: int, cwd: Path) -> list[float]:
    table = JobTable()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        answer = await bash_and_wait(
            "true", cwd, truncation=DEFAULT_TRUNCATION, artifact_dir=None, table=table, budget_ms=60_000
        )
        times.append(time.perf_counter() - start)
        assert isinstance(answer, Settled)
        assert answer.exit_code == 0
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        baseline(10, cwd)  # warm-up
        asyncio.run(jobs(10, cwd))
        base: list[float] = []
        ours: list[float] = []
        for _ in range(4):  # interleave rounds so machine load hits both alike
            base += baseline(args.runs // 4, cwd)
            ours += asyncio.run(jobs(args.runs // 4, cwd))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"subprocess.run(bash -c true): median {b * 1000:.2f} ms over {len(base)} runs")
    print(f"bash job for true, to its end: median {o * 1000:.2f} ms over {len(ours)} runs")
    print(f"ratio job / subprocess.run: {o / b:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
