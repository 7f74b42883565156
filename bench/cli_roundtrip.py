"""CLI round trip against a warm daemon, against `bash -c true` measured in the same run.

Prints: the median wall time of `bash -c true`, of `eukhe bash --json -- true` (a fresh CLI process each time, the
daemon warm), and their ratio (target: under 10x); then where the time goes (`python -c pass`; the imports any CLI
call needs, argparse and json, a floor no client code can go under; the bash command's imports; a daemon request
that does no work), measured interleaved with the two, one call of each per round, so that load on a shared machine
weighs on all alike; then requests per second over one persistent connection (supervisor `ping`, a forwarded
`session.ping`, and `bash true`). Uses a private TMPDIR and agent dir and stops the daemon it starts. `--quick` for a
short run.

What is measured is the client's start-up as a user's shell runs it: the installed `eukhe` console script next to
this interpreter (`.venv/bin/eukhe`), not `uv run eukhe`, which adds uv's own start-up (finding the project,
checking the lock and the venv) before eukhe runs; that figure is printed too, for information. Python's bytecode
cache is on, as after any first run of an installed eukhe: the CLI runs without PYTHONDONTWRITEBYTECODE and with
PYTHONPYCACHEPREFIX in the run's private directory (so the repo is not written to), and each timing starts with a
warm-up call. The same command with PYTHONDONTWRITEBYTECODE=1 (eukhe's modules compiled on every call, unless a
__pycache__ exists) is printed for information.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.verdict import Target, report
from eukhe.daemon.client import DaemonClient

REPO = Path(__file__).resolve().parents[1]


def timed(action: Callable[[], object], runs: int) -> list[float]:
    """Wall time of each of `runs` calls, after one warm-up call."""
    action()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def timed_together(actions: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Wall times of each action over `runs` rounds, one call of each per round (after one warm-up round): on a
    shared machine, load that comes and goes then weighs on every action alike, and the ratios stay fair."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for round_number in range(runs + 1):
        for name, action in actions.items():
            start = time.perf_counter()
            action()
            if round_number:
                times[name].append(time.perf_counter() - start)
    return times


def rate(action: Callable[[], object], runs: int) -> float:
    """Calls per second over `runs` calls."""
    action()
    start = time.perf_counter()
    for _ in range(runs):
        action()
    return runs / (time.perf_counter() - start)


def show(label: str, times: list[float], note: str = "") -> None:
    """One line: the label and the median of `times` in ms."""
    print(f"{label:<46}{statistics.median(times) * 1000:8.2f} ms{note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few runs (a smoke test of the benchmark)")
    args = parser.parse_args()
    runs, requests = (5, 100) if args.quick else (30, 2000)

    root = Path(tempfile.mkdtemp(prefix="ekb", dir="/tmp"))
    (root / "t").mkdir(mode=0o700)
    (root / "p").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(TMPDIR=str(root / "t"), EUKHE_CODING_AGENT_DIR=str(root / "a"), PYTHONPYCACHEPREFIX=str(root / "pyc"))
    uncached_env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    del uncached_env["PYTHONPYCACHEPREFIX"]
    script = Path(sys.executable).parent / "eukhe"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "eukhe.cli.main"]
    uv = shutil.which("uv")

    def eukhe(*words: str, command: list[str] = cli, with_env: dict[str, str] = env) -> str:
        done = subprocess.run([*command, *words], env=with_env, capture_output=True, text=True, check=True)
        return done.stdout

    def python(code: str) -> object:
        return subprocess.run([sys.executable, "-c", code], env=env, check=True)

    try:
        session = json.loads(eukhe("session", "create", "--cwd", str(root / "p"), "--json"))["id"]
        bash_true = ("bash", "--session", session, "--json", "--", "true")
        # Interleaved: the baseline, the round trip and where its time goes (the interpreter, the imports every CLI
        # call needs, the bash command's imports, a daemon request that does no work).
        times = timed_together(
            {
                "bash": lambda: subprocess.run(["bash", "-c", "true"], check=True),
                "trip": lambda: eukhe(*bash_true),
                "pass": lambda: python("pass"),
                "floor": lambda: python("import argparse, json, _socket"),
                "imports": lambda: python("import eukhe.cli.main, eukhe.cli.bash"),
                "status": lambda: eukhe("daemon", "status", "--json"),
            },
            runs,
        )
        baseline, roundtrip = times["bash"], times["trip"]
        base, trip = statistics.median(baseline), statistics.median(roundtrip)
        show("bash -c true:", baseline, f" (median of {runs}; best {min(baseline) * 1000:.2f})")
        show("eukhe bash --json -- true (warm):", roundtrip, f" (median of {runs}; best {min(roundtrip) * 1000:.2f})")
        print(f"{'ratio:':<46}{trip / base:8.1f}x (target < 10x; the console script {cli[0]})")
        show("  python -c pass:", times["pass"])
        show("  python -c 'import argparse, json, _socket':", times["floor"], " (what any call imports)")
        show("  python -c 'import eukhe.cli.bash':", times["imports"])
        show("  eukhe daemon status --json:", times["status"])
        uncached = timed(lambda: eukhe(*bash_true, with_env=uncached_env), runs)
        show("  eukhe bash, PYTHONDONTWRITEBYTECODE=1:", uncached, " (for information)")
        if uv is not None:
            via_uv = timed(lambda: eukhe(*bash_true, command=[uv, "run", "--project", str(REPO), "eukhe"]), runs)
            show("  uv run eukhe bash (uv's start-up too):", via_uv, " (for information)")

        socket_path = root / "t" / f"eukhe-{os.getuid()}" / "daemon.sock"
        with DaemonClient.connect(socket_path) as client:
            in_daemon = timed(lambda: client.call("bash", {"session": session, "command": "true"}), runs)
            show("  bash true inside the daemon:", in_daemon)
            ping = rate(lambda: client.call("ping"), requests)
            forwarded = rate(lambda: client.call("session.ping", {"session": session}), requests // 4)
            bash = rate(lambda: client.call("bash", {"session": session, "command": "true"}), max(requests // 40, 5))
        print(f"persistent connection: ping {ping:8.0f} req/s")
        print(f"persistent connection: session.ping (forwarded to the worker) {forwarded:8.0f} req/s")
        print(f"persistent connection: bash true {bash:8.1f} req/s")
        report([Target("eukhe bash --json -- true / bash -c true, median", trip / base, "<", 10, "x")])
    finally:
        subprocess.run([*cli, "daemon", "stop"], env=env, capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
