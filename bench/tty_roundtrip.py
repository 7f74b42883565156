"""A REPL round trip through `jobs.write`, against a raw pseudo-terminal round trip in one process, in the same run.

    uv run python bench/tty_roundtrip.py [--runs N] [--confined]

- raw: this process runs `python -q` on a pseudo-terminal of its own, writes `1\\n` to it and reads until the REPL
  answered `1` and prompted again;
- trip: a tty job running `python -q` in a daemon-hosted session; one `jobs.write` request of `1\\n` over a
  persistent connection, until its answer shows `1` (a write that answered before the REPL did is followed by
  reads, counted in);
- floor: the daemon's own request floor, a `jobs.list` on the same connection.

The three are measured interleaved, one of each per round, so that load on a shared machine weighs on all alike.
Target: the median trip at most 3 x the median raw trip plus the median floor. Uses a private TMPDIR and agent dir,
and stops the daemon it starts. `--confined` runs the job in the session's sandbox (default: unconfined).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.verdict import Target, report
from eukhe.daemon.client import DaemonClient

DEADLINE_S = 30.0
PROMPT = b">>> "


class RawRepl:
    """`python -q` on a pseudo-terminal of this process: the baseline round trip."""

    def __init__(self) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-q"], stdin=slave, stdout=slave, stderr=slave, start_new_session=True
        )
        os.close(slave)
        self.read_until(PROMPT)

    def read_until(self, wanted: bytes) -> bytes:
        seen = b""
        deadline = time.monotonic() + DEADLINE_S
        while not seen.endswith(wanted):
            if time.monotonic() > deadline:
                raise AssertionError(f"the REPL never answered: {seen!r}")
            readable, _, _ = select.select([self.master], [], [], DEADLINE_S)
            if readable:
                seen += os.read(self.master, 1 << 16)
        return seen

    def trip(self) -> None:
        os.write(self.master, b"1\n")
        seen = self.read_until(b"\r\n1\r\n" + PROMPT)
        assert seen.endswith(b"1\r\n>>> "), seen

    def close(self) -> None:
        os.write(self.master, b"\x04")
        self.process.wait(timeout=DEADLINE_S)
        os.close(self.master)


def answered(answer: dict[str, Any]) -> bool:
    """The REPL's answer `1` is on the screen, on a line of its own, and its next prompt after it."""
    lines = (answer.get("screen") or "").splitlines()
    return "1" in lines[-3:] and lines[-1] == ">>>"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--confined", action="store_true", help="run the tty job in the session's sandbox")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="ekt", dir="/tmp"))
    (root / "t").mkdir(mode=0o700)
    (root / "p").mkdir()
    env = dict(os.environ)
    env.update(TMPDIR=str(root / "t"), EUKHE_CODING_AGENT_DIR=str(root / "a"))
    cli = [sys.executable, "-m", "eukhe.cli.main"]
    raw = RawRepl()
    try:
        create = ["session", "create", "--cwd", str(root / "p"), "--json"]
        if not args.confined:
            create += ["--sandbox", "off"]
        done = subprocess.run([*cli, *create], env=env, capture_output=True, text=True, check=True)
        session = json.loads(done.stdout)["id"]
        socket_path = root / "t" / f"eukhe-{os.getuid()}" / "daemon.sock"
        with DaemonClient.connect(socket_path) as client:
            started = client.call(
                "bash", {"session": session, "command": f"{sys.executable} -q", "tty": True, "budget_ms": 0}
            )
            job = started["job"]

            def write(text: str) -> dict[str, Any]:
                answer: dict[str, Any] = client.call(
                    "jobs.write", {"session": session, "job": job, "input": text, "budget_ms": 5_000}
                )
                assert answer["status"] == "written", answer
                return answer

            deadline = time.monotonic() + DEADLINE_S
            while not (write("").get("screen") or "").endswith(">>>"):
                assert time.monotonic() < deadline, "the tty job's REPL never prompted"

            reads = 0

            def trip() -> None:
                nonlocal reads
                answer = write("1\n")
                while not answered(answer):
                    reads += 1
                    answer = write("")

            actions: dict[str, Callable[[], object]] = {
                "raw": raw.trip,
                "trip": trip,
                "floor": lambda: client.call("jobs.list", {"session": session}),
            }
            times: dict[str, list[float]] = {name: [] for name in actions}
            for round_number in range(args.runs + 10):  # the first 10 rounds warm up
                for name, action in actions.items():
                    start = time.perf_counter()
                    action()
                    if round_number >= 10:
                        times[name].append(time.perf_counter() - start)
            client.call("jobs.cancel", {"session": session, "job": job})
    finally:
        raw.close()
        subprocess.run([*cli, "daemon", "stop"], env=env, capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)

    raw_ms, trip_ms, floor_ms = (statistics.median(times[name]) * 1000 for name in ("raw", "trip", "floor"))
    target = 3 * raw_ms + floor_ms
    where = "confined" if args.confined else "unconfined"
    print(f"raw pseudo-terminal round trip (python -q, 1):   median {raw_ms:7.3f} ms over {len(times['raw'])}")
    print(f"jobs.write round trip ({where} tty job):    median {trip_ms:7.3f} ms over {len(times['trip'])}")
    print(f"daemon request floor (jobs.list):                median {floor_ms:7.3f} ms over {len(times['floor'])}")
    print(f"writes that answered before the REPL did, read on: {reads}")
    print(f"ratio (trip - floor) / raw: {(trip_ms - floor_ms) / raw_ms:.2f}")
    report([Target(f"jobs_write round trip, {where}, median, against 3 x raw + floor", trip_ms, "<=", target, "ms")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
