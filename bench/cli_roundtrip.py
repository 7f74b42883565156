"""CLI round trip against a warm daemon, against `bash -c true` measured in the same run (issue 4, 6).

Prints: the mean wall time of `bash -c true`, of `eukhe bash --json -- true` (a fresh CLI process each time, the
daemon warm), and their ratio (target: under 10x); then requests per second over one persistent connection
(supervisor `ping`, a forwarded `session.ping`, and `bash true`). Uses a private TMPDIR and agent dir and stops the
daemon it starts. `--quick` for a short run.
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

from eukhe.daemon.client import DaemonClient


def timed(action: Callable[[], object], runs: int) -> list[float]:
    """Wall time of each of `runs` calls, after one warm-up call."""
    action()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def rate(action: Callable[[], object], runs: int) -> float:
    """Calls per second over `runs` calls."""
    action()
    start = time.perf_counter()
    for _ in range(runs):
        action()
    return runs / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few runs (a smoke test of the benchmark)")
    args = parser.parse_args()
    runs, requests = (5, 100) if args.quick else (30, 2000)

    root = Path(tempfile.mkdtemp(prefix="ekb", dir="/tmp"))
    (root / "t").mkdir(mode=0o700)
    (root / "p").mkdir()
    env = {**os.environ, "TMPDIR": str(root / "t"), "EUKHE_CODING_AGENT_DIR": str(root / "a")}
    script = Path(sys.executable).parent / "eukhe"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "eukhe.cli.main"]

    def eukhe(*words: str) -> str:
        done = subprocess.run([*cli, *words], env=env, capture_output=True, text=True, check=True)
        return done.stdout

    try:
        session = json.loads(eukhe("session", "create", "--cwd", str(root / "p"), "--json"))["id"]
        baseline = timed(lambda: subprocess.run(["bash", "-c", "true"], check=True), runs)
        roundtrip = timed(lambda: eukhe("bash", "--session", session, "--json", "--", "true"), runs)
        base, trip = statistics.median(baseline), statistics.median(roundtrip)
        print(f"bash -c true:                         {base * 1000:8.2f} ms (median of {runs})")
        print(f"eukhe bash --json -- true (warm):     {trip * 1000:8.2f} ms (median of {runs})")
        print(f"ratio:                                {trip / base:8.1f}x (target < 10x)")
        # Where the time goes: the interpreter, the CLI's imports, a daemon request that does no work.
        startup = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), runs)
        imports = timed(lambda: subprocess.run([sys.executable, "-c", "import eukhe.cli.main"], check=True), runs)
        status = timed(lambda: eukhe("daemon", "status", "--json"), runs)
        print(f"  python -c pass:                     {statistics.median(startup) * 1000:8.2f} ms")
        print(f"  python -c 'import eukhe.cli.main':  {statistics.median(imports) * 1000:8.2f} ms")
        print(f"  eukhe daemon status --json:         {statistics.median(status) * 1000:8.2f} ms")

        socket_path = root / "t" / f"eukhe-{os.getuid()}" / "daemon.sock"
        with DaemonClient.connect(socket_path) as client:
            in_daemon = timed(lambda: client.call("bash", {"session": session, "command": "true"}), runs)
            print(f"  bash true inside the daemon:        {statistics.median(in_daemon) * 1000:8.2f} ms")
            ping = rate(lambda: client.call("ping"), requests)
            forwarded = rate(lambda: client.call("session.ping", {"session": session}), requests // 4)
            bash = rate(lambda: client.call("bash", {"session": session, "command": "true"}), max(requests // 40, 5))
        print(f"persistent connection: ping {ping:8.0f} req/s")
        print(f"persistent connection: session.ping (forwarded to the worker) {forwarded:8.0f} req/s")
        print(f"persistent connection: bash true {bash:8.1f} req/s")
    finally:
        subprocess.run([*cli, "daemon", "stop"], env=env, capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
