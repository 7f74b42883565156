"""Benchmark: the round trip of an MCP `bash` call of `true` over one stdio connection to a warm
`eukhe mcp`, against `subprocess.run(["bash", "-c", "true"])` in the same run. Prints the median of each, their
ratio (target: at most 3x), and where the time goes, each measured apart: an MCP `jobs_list` of an empty session
(the MCP path without a process to run; first, since the list grows with every run), and the same `bash true` asked
of the session's worker directly over one persistent socket (where `eukhe mcp` sends its calls), as the `bash` op and
as a journaled tool call (`tool.call`: the Harness's start and settle, one commit each, one fdatasync for both and the
job's row); their difference is the journaling's share
(last, so that the work a run leaves in the daemon, its journal row, does not weigh on the two compared).

The two compared are measured interleaved, one of each per round, so that load on a shared machine weighs on both
alike.
Uses a private TMPDIR and agent dir (its own daemon, stopped at the end).

    uv run python bench/mcp_roundtrip.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.verdict import Target, report
from eukhe.daemon.client import DaemonClient


def baseline(cwd: Path) -> None:
    subprocess.run(["bash", "-c", "true"], cwd=cwd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


async def timed_together(actions: dict[str, Callable[[], Awaitable[object]]], runs: int) -> dict[str, list[float]]:
    """Wall times of each action over `runs` rounds, one call of each per round, after a warm-up round."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for round_number in range(runs + 1):
        for name, action in actions.items():
            start = time.perf_counter()
            await action()
            if round_number:
                times[name].append(time.perf_counter() - start)
    return times


def show(label: str, times: list[float]) -> None:
    print(f"{label:<44}median {statistics.median(times) * 1000:7.2f} ms  best {min(times) * 1000:7.2f} ms")


async def measure(runs: int, root: Path, env: dict[str, str]) -> None:
    cwd = root / "p"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "eukhe.cli.main", "mcp", "--sandbox", "off", "--cwd", str(cwd)], env=env
    )
    with (root / "mcp.err").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            init = await client.initialize()
            session = (init.instructions or "").split("session ", 1)[1].split(",", 1)[0]

            async def mcp_true() -> None:
                result = await client.call_tool("bash", {"command": "true"})
                assert not result.is_error, result.content
                assert result.structured_content["exit_code"] == 0

            async def mcp_jobs_list() -> None:
                result = await client.call_tool("jobs_list", {})
                assert result.structured_content == {"jobs": []}

            async def subprocess_true() -> None:
                baseline(cwd)

            sock = root / "t" / f"eukhe-{os.getuid()}" / "daemon.sock"
            with DaemonClient.connect(sock) as supervisor:
                worker_socket = Path(supervisor.call("session.ping", {"session": session})["socket"])
            with DaemonClient.connect(worker_socket) as daemon:  # as `eukhe mcp` sends its calls: to the worker

                async def daemon_true() -> None:
                    daemon.call("bash", {"session": session, "command": "true"})

                async def daemon_call_true() -> None:
                    daemon.call("tool.call", {"session": session, "tool": "bash", "args": {"command": "true"}})

                listing = await timed_together({"list": mcp_jobs_list}, runs)
                times = await timed_together({"bash": subprocess_true, "mcp": mcp_true}, runs)
                direct = await timed_together({"daemon": daemon_true, "call": daemon_call_true}, runs)
    base, trip = statistics.median(times["bash"]), statistics.median(times["mcp"])
    show("subprocess.run(bash -c true):", times["bash"])
    show("MCP bash call of true (one stdio session):", times["mcp"])
    print(f"{'ratio MCP call / subprocess.run:':<44}{trip / base:.2f}x (target <= 3x; {runs} rounds)")
    show("  bash true asked of the worker directly:", direct["daemon"])
    show("  the same as a journaled tool call:", direct["call"])
    journaling = statistics.median(direct["call"]) - statistics.median(direct["daemon"])
    print(
        f"{'  the tool call (harness, start + settle):':<44}{journaling * 1000:7.2f} ms, "
        f"{journaling / trip:.0%} of the MCP call"
    )
    show("  MCP jobs_list, no jobs (no process to run):", listing["list"])
    report([Target("MCP bash call / subprocess.run, median", trip / base, "<=", 3, "x")])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ekm", dir="/tmp"))
    (root / "t").mkdir(mode=0o700)
    (root / "p").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EUKHE_")}
    env.update(TMPDIR=str(root / "t"), EUKHE_CODING_AGENT_DIR=str(root / "a"))
    try:
        anyio.run(measure, args.runs, root, env)
    finally:
        stop = [sys.executable, "-m", "eukhe.cli.main", "daemon", "stop"]
        subprocess.run(stop, env=env, capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
