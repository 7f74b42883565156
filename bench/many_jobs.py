"""Benchmark (issue 3, 10c): 50 concurrent bash jobs, each writing 200 MB, on one host event loop. Checks and prints:
every job ends exactly once, kept + dropped is exact for each, and the host's peak RSS (target: under 200 MB).

    uv run python bench/many_jobs.py [--jobs 50] [--scale 1.0] [--artifacts]

`--scale 0.05` writes 10 MB per job, for a quick run. `--artifacts` also spills each full output to a temporary
artifact dir (jobs x size of disk).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path

from eukhe.core.job import End, Exited
from eukhe.core.limits import DEFAULT_TRUNCATION
from eukhe.jobs import Job, JobTable, wait_until
from eukhe.jobs.bash import start_bash


class EndCounter:
    """Counts every end the table reports, per job."""

    def __init__(self) -> None:
        self.ends: Counter[str] = Counter()

    def job_started(self, job: Job) -> None:
        pass

    def job_ended(self, job: Job, end: End) -> None:
        self.ends[job.id] += 1


async def run(jobs: int, size: int, cwd: Path, artifacts: Path | None) -> tuple[list[Job], EndCounter, float]:
    table = JobTable()
    counter = EndCounter()
    table.subscribe(counter)
    start = time.perf_counter()
    started = [
        await start_bash(
            f"yes 'a line of output from a job' | head -c {size}",
            cwd,
            truncation=DEFAULT_TRUNCATION,
            artifact_dir=artifacts,
            table=table,
        )
        for _ in range(jobs)
    ]
    deadline = table.clock.now_ms() + 3_600_000
    for job in started:
        await wait_until(job, deadline)
    return started, counter, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 200 MB each job writes")
    parser.add_argument("--artifacts", action="store_true", help="spill each full output to an artifact")
    args = parser.parse_args()
    size = int(200_000_000 * args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        artifacts = Path(tmp) / "artifacts" if args.artifacts else None
        jobs, counter, seconds = asyncio.run(run(args.jobs, size, Path(tmp), artifacts))
    once = all(counter.ends[job.id] == 1 for job in jobs) and len(counter.ends) == len(jobs)
    exact = all(
        job.kept + job.dropped == size and job.result().bytes_kept + job.result().bytes_dropped == size for job in jobs
    )
    exited = all(job.end == Exited(0) for job in jobs)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    total_mb = len(jobs) * size / 1e6
    print(
        f"{len(jobs)} jobs x {size / 1e6:.0f} MB = {total_mb:.0f} MB in {seconds:.1f} s ({total_mb / seconds:.0f} MB/s)"
    )
    print(f"every job ended exactly once: {once} (all exit 0: {exited})")
    print(f"kept + dropped exact for every job: {exact}")
    print(f"host peak RSS: {peak_mb:.0f} MB (target < 200 MB): {'ok' if peak_mb < 200 else 'OVER'}")


if __name__ == "__main__":
    main()
