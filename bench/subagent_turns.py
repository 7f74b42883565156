"""Benchmark: one turn of a prompt child (its model answers at once with one `bash true` tool call) against the same
call made directly over the daemon (`tool.call` of `bash true` on one persistent socket), in the same run. Prints the
median of each, their difference and ratio; target: a turn costs at most the direct call + 3 ms.

A turn is the time between two consecutive requests the scripted Chat Completions server (tests/chat_server.py, on
127.0.0.1) gets from the child: its reply read, the assistant message journaled, the tool call run through the
child session's Harness (start and settle), and the next request sent. The two are measured in alternating rounds,
so that load on a shared machine weighs on both alike. Uses a private TMPDIR and agent dir (its own daemon, stopped
at the end).

    uv run python bench/subagent_turns.py [--turns N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.verdict import Target, report
from eukhe.daemon.client import DaemonClient, connect
from tests.chat_server import Scripted, chat_server, reply

TARGET_MS = 3.0
ROUNDS = 4
KEY = "sk-bench"


def direct(daemon: DaemonClient, session: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        daemon.call("tool.call", {"session": session, "tool": "bash", "args": {"command": "true"}})
        times.append(time.perf_counter() - start)
    return times


def turns_of(daemon: DaemonClient, session: str, name: str, turns: int, seen: list[float]) -> list[float]:
    """Spawn a prompt child that makes `turns` bash calls, then answers; the gaps between its requests."""
    before = len(seen)
    daemon.call("children.spawn", {"session": session, "name": name, "prompt": "work", "api_key": KEY})
    answer = daemon.call("children.collect", {"session": session, "names": [name], "timeout_ms": 600_000})
    (report,) = answer["reports"]
    assert report["status"] == "answered", report
    stamps = seen[before:]
    assert len(stamps) == turns + 1, (len(stamps), turns)
    return [later - earlier for earlier, later in itertools.pairwise(stamps)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200, help="turns measured in all (and as many direct calls)")
    args = parser.parse_args()
    per_round = max(2, args.turns // ROUNDS)
    root = Path(tempfile.mkdtemp(prefix="eks", dir="/tmp"))
    (root / "t").mkdir(mode=0o700)
    (root / "a").mkdir()
    work = root / "w"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EUKHE_")}
    env.update(TMPDIR=str(root / "t"), EUKHE_CODING_AGENT_DIR=str(root / "a"))
    seen: list[float] = []

    def script(body: Any, number: int) -> Scripted:
        seen.append(time.perf_counter())
        asked = sum(1 for message in body["messages"] if message["role"] == "tool")
        return reply(None, ("bash", {"command": "true"})) if asked < per_round else reply("done")

    try:
        with chat_server(script) as server:
            model = {"base_url": server.url, "name": "bench", "api_key_env": "EUKHE_BENCH_KEY",
                     "max_turns": per_round + 1}  # fmt: skip
            (root / "a" / "settings.json").write_text(json.dumps({"model": model}))
            os.environ.update(env)  # this process's client finds the daemon it starts
            sock = root / "t" / f"eukhe-{os.getuid()}" / "daemon.sock"
            with connect(sock) as daemon:
                created = daemon.call("session.create", {"cwd": str(work), "sandbox": {"mode": "off"}})
                session = str(created["id"])
                direct(daemon, session, 10)  # warm-up: the worker, its journal, bash
                turns_of(daemon, session, "warm", per_round, seen)
                calls: list[float] = []
                turns: list[float] = []
                for number in range(ROUNDS):
                    calls += direct(daemon, session, per_round)
                    turns += turns_of(daemon, session, f"child{number}", per_round, seen)
    finally:
        stop = [sys.executable, "-m", "eukhe.cli.main", "daemon", "stop"]
        subprocess.run(stop, env=env, capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
    call_ms, turn_ms = statistics.median(calls) * 1000, statistics.median(turns) * 1000
    print(
        f"tool.call of bash true over the daemon: median {call_ms:.2f} ms, best {min(calls) * 1000:.2f} ms "
        f"over {len(calls)} calls"
    )
    print(
        f"a prompt child's turn (one bash true):  median {turn_ms:.2f} ms, best {min(turns) * 1000:.2f} ms "
        f"over {len(turns)} turns"
    )
    print(f"turn - direct call: {turn_ms - call_ms:+.2f} ms, ratio {turn_ms / call_ms:.2f}")
    report([Target("a prompt child's turn - the direct tool.call, median", turn_ms - call_ms, "<=", TARGET_MS, "ms")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
