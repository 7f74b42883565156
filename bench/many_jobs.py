"""Benchmark: 50 concurrent bash jobs, each writing 200 MB, on one host event loop, against a
baseline from the same run: the same 50 pipelines at once, each read by its own `cat` (to /dev/null).

Prints both times, the ratio baseline / eukhe (target: at least 0.5), and checks: every job ends exactly once,
kept + dropped is exact for each, and the host's peak RSS (target: under 200 MB).

    uv run python bench/many_jobs.py [--jobs 50] [--scale 1.0] [--artifacts] [--profile]

`--scale 0.05` writes 10 MB per job, for a quick run. `--artifacts` also spills each full output to a temporary
artifact dir (jobs x size of disk). `--profile` prints where the host's time goes (cProfile, by own time).
`--rounds N` alternates N baseline and eukhe runs (the machine's other load weighs on both alike) and reports the
median ratio. Run from a terminal, the host detaches from it first, as a daemon worker is (see `as_a_worker`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.verdict import Target, report
from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.core.job import End, Exited
from eukhe.jobs import Job, JobTable, wait_until
from eukhe.jobs.bash import start_bash
from eukhe.procs import has_controlling_terminal


class EndCounter:
    """Counts every end the table reports, per job."""

    def __init__(self) -> None:
        self.ends: Counter[str] = Counter()

    def job_started(self, job: Job) -> None:
        pass

    def job_ended(self, job: Job, end: End) -> None:
        self.ends[job.id] += 1


def pipeline(size: int) -> str:
    """What every job runs (the baseline runs the same, read by `cat`)."""
    return f"yes 'a line of output from a job' | head -c {size}"


async def run(jobs: int, size: int, cwd: Path, artifacts: Path | None) -> tuple[list[Job], EndCounter, float]:
    table = JobTable()
    counter = EndCounter()
    table.subscribe(counter)
    start = time.perf_counter()
    started = [
        await start_bash(pipeline(size), cwd, truncation=DEFAULT_TRUNCATION, artifact_dir=artifacts, table=table)
        for _ in range(jobs)
    ]
    deadline = table.clock.now_ms() + 3_600_000
    for job in started:
        await wait_until(job, deadline)
    return started, counter, time.perf_counter() - start


def baseline(jobs: int, size: int) -> float:
    """The same pipelines at once, each read by its own `cat` to /dev/null: seconds until every one has ended."""
    start = time.perf_counter()
    runs = [
        subprocess.Popen(["bash", "-c", f"{pipeline(size)} | cat > /dev/null"], stdin=subprocess.DEVNULL)
        for _ in range(jobs)
    ]
    codes = [process.wait() for process in runs]
    if any(codes):
        raise SystemExit(f"a baseline pipeline failed: {codes}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 200 MB each job writes")
    parser.add_argument("--artifacts", action="store_true", help="spill each full output to an artifact")
    parser.add_argument("--profile", action="store_true", help="profile the host (cProfile; slows it down)")
    parser.add_argument("--rounds", type=int, default=3, help="baseline and eukhe runs, alternated; the median ratio")
    args = parser.parse_args()
    size = int(200_000_000 * args.scale)
    profiler = cProfile.Profile() if args.profile else None
    ratios: list[float] = []
    for _ in range(max(1, args.rounds)):
        base = baseline(args.jobs, size)
        with tempfile.TemporaryDirectory() as tmp:
            artifacts = Path(tmp) / "artifacts" if args.artifacts else None
            if profiler is not None:
                profiler.enable()
            jobs, counter, seconds = asyncio.run(run(args.jobs, size, Path(tmp), artifacts))
            if profiler is not None:
                profiler.disable()
        ratios.append(base / seconds)
        print(f"round: baseline {base:.2f} s, eukhe {seconds:.2f} s, ratio {base / seconds:.2f}x")
    once = all(counter.ends[job.id] == 1 for job in jobs) and len(counter.ends) == len(jobs)
    exact = all(
        job.kept + job.dropped == size and job.result().bytes_kept + job.result().bytes_dropped == size for job in jobs
    )
    exited = all(job.end == Exited(0) for job in jobs)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    total_mb = len(jobs) * size / 1e6
    print(f"last baseline: {args.jobs} pipelines x {size / 1e6:.0f} MB, each read by cat: {base:.2f} s")
    print(
        f"last eukhe:    {len(jobs)} jobs x {size / 1e6:.0f} MB = {total_mb:.0f} MB in {seconds:.2f} s"
        f" ({total_mb / seconds:.0f} MB/s)"
    )
    ratio = statistics.median(ratios)
    print(
        f"ratio (baseline time / eukhe time), median of {len(ratios)}: {ratio:.2f}x (target >= 0.5x):"
        f" {'ok' if ratio >= 0.5 else 'UNDER'}"
    )
    print(f"every job ended exactly once: {once} (all exit 0: {exited})")
    print(f"kept + dropped exact for every job: {exact}")
    print(f"host peak RSS: {peak_mb:.0f} MB (target < 200 MB): {'ok' if peak_mb < 200 else 'OVER'}")
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    report(
        [
            Target("cat baseline time / eukhe time, median", ratio, ">=", 0.5, "x"),
            Target("host peak RSS", peak_mb, "<", 200, "MB"),
            Target("jobs ended once, exit 0, kept + dropped exact", float(once and exited and exact), ">=", 1),
        ]
    )


def as_a_worker() -> None:
    """Run `main` the way a daemon worker hosts jobs: in a session of its own, without a terminal (with one, each job
    would get a session of its own, and with it an equal share of the CPU against the host reading them)."""
    if not has_controlling_terminal():
        main()
        return
    child = os.fork()
    if child == 0:
        os.setsid()
        try:
            main()
        finally:
            sys.stdout.flush()
            os._exit(0)
    _, status = os.waitpid(child, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    as_a_worker()
