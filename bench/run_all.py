"""Run every benchmark in sequence and print one table of their targets: each row a figure against its target, ok or
MISSED, and the path of the script that measured it. Meant for a quiet machine: each bench compares against its own
baseline in the same run, but other load still weighs on the two sides unevenly.

    uv run python bench/run_all.py              # every bench at its own defaults (about an hour)
    uv run python bench/run_all.py --quick      # each scaled down (a smoke test of the figures, minutes)
    uv run python bench/run_all.py --only handback --only workspace_spawn

A script's output goes to stderr as it runs; the table goes to stdout at the end. Exit status 1 when a target was
missed, a bench printed no target, or a bench failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.verdict import Target, number, parse

BENCH_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class Bench:
    """One script, with the arguments of a full run and of a quick one."""

    name: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    needs_root: bool = False

    @property
    def path(self) -> Path:
        return BENCH_DIR / f"{self.name}.py"


BENCHES = (
    Bench("bash_roundtrip", quick=("--runs", "40")),
    Bench("bounded_output", full=("--size-mib", "512", "--rounds", "3"), quick=("--size-mib", "64", "--rounds", "1")),
    Bench("cli_roundtrip", quick=("--quick",)),
    Bench("mcp_roundtrip", quick=("--runs", "40")),
    Bench("journal_throughput", quick=("--calls", "500", "--rounds", "2")),
    Bench("kernel_vs_jupyter", quick=("--quick",)),
    Bench("many_jobs", quick=("--scale", "0.05", "--rounds", "1")),
    Bench("many_sessions", quick=("--quick",)),
    Bench("sandbox_overhead", quick=("--runs", "60", "--cells", "100")),
    Bench("transport_roundtrip", quick=("--runs", "40"), needs_root=True),
    Bench("handback", quick=("--files", "2000", "--megabytes", "18", "--runs", "2")),
    Bench("workspace_spawn", quick=("--files", "2000", "--megabytes", "18", "--runs", "2")),
    Bench("subagent_turns", quick=("--turns", "40")),
    Bench("tty_roundtrip", quick=("--runs", "40")),
    Bench("soak", quick=("--seconds", "30")),
)
"""Every benchmark run_all knows, in the order it runs them."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one script gave: its targets with their printed verdicts, its exit status, its time."""

    bench: Bench
    targets: list[tuple[Target, bool]]
    status: int | None  # None: skipped
    seconds: float
    note: str = ""


def run(bench: Bench, quick: bool) -> Outcome:
    """Run one script (its output to stderr as it comes) and read back its target lines."""
    if bench.needs_root and os.geteuid() != 0:
        return Outcome(bench, [], None, 0.0, "skipped: needs root")
    args = bench.quick if quick else bench.full
    command = [sys.executable, str(bench.path), *args]
    print(f"== {' '.join([bench.path.relative_to(BENCH_DIR.parent).as_posix(), *args])}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    lines: list[str] = []
    with subprocess.Popen(command, cwd=BENCH_DIR.parent, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stderr.write(line)
            lines.append(line)
        status = process.wait()
    return Outcome(bench, parse("".join(lines)), status, time.perf_counter() - start)


def table(outcomes: list[Outcome]) -> tuple[list[str], bool]:
    """The rows (measure, figure, target, verdict, script) and whether every target was met."""
    rows = [("measure", "figure", "target", "verdict", "script")]
    all_met = True
    for outcome in outcomes:
        script = outcome.bench.path.relative_to(BENCH_DIR.parent).as_posix()
        if outcome.status is None:
            rows.append(("-", "-", "-", outcome.note, script))
            continue
        for target, met in outcome.targets:
            unit = f" {target.unit}" if target.unit else ""
            verdict = "ok" if met else "MISSED"
            bound = f"{target.op} {number(target.bound)}"
            rows.append((target.measure, number(target.figure) + unit, bound, verdict, script))
            all_met = all_met and met
        if outcome.status != 0 or not outcome.targets:
            why = f"exit {outcome.status}" if outcome.status != 0 else "no target printed"
            rows.append(("-", "-", "-", f"FAILED ({why})", script))
            all_met = False
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines, all_met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="each bench scaled down (minutes, not an hour)")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this bench (repeatable)")
    args = parser.parse_args()
    known = {bench.name: bench for bench in BENCHES}
    unknown = sorted(set(args.only or ()) - set(known))
    if unknown:
        parser.error(f"unknown bench: {', '.join(unknown)} (known: {', '.join(known)})")
    chosen = [bench for bench in BENCHES if not args.only or bench.name in args.only]
    outcomes = [run(bench, args.quick) for bench in chosen]
    lines, all_met = table(outcomes)
    print("\n".join(lines))
    took = sum(outcome.seconds for outcome in outcomes)
    print(f"{'quick' if args.quick else 'full'} run, {len(outcomes)} benches in {took:.0f} s: ", end="")
    print("every target met" if all_met else "MISSED or FAILED rows above")
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
