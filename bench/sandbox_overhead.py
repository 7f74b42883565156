"""Benchmark: what the sandbox costs, in one run (docs/sandbox.md).

- A `bash true` round trip through a session (`execute_bash_and_wait`), confined and unconfined; and, as the
  baseline, raw `bwrap <the same flags> bash -c true` against raw `bash -c true`. Target: what eukhe adds on top of
  bwrap's own cost is at most half of that cost, (confined - unconfined) <= 1.5 x (raw bwrap - raw bash).
- A cell's round trip (`1 + 1`) on a confined kernel and an unconfined one. Target: confined <= 1.1 x unconfined.
- The probe a session's start runs. Target: under 50 ms.
- A backgrounding call (`sleep 300 >/dev/null 2>&1 & echo $EPOCHREALTIME`): the time from its shell's exit (the
  time it echoes last, on the wall clock its host reads too) to its answer, which names the job that took the
  sleep, confined and unconfined; and its ratio to the `bash true` round trip of the same run. Target: within the
  drain that already follows every shell's exit, <= 150 ms. The left job is cancelled after each, untimed.
- The network allowlist: an HTTP GET (a fresh connection each) from a confined job to a server on the host's
  loopback, through eukhe's proxy with the server's name allowed, against the same GET straight to it with the
  network on. Target: allowlist <= 1.5 x on + 2 ms. And the proxy's memory per session (the process's RSS grown by
  starting many proxies, over their number; target <= 10 MB), beside the sandbox's pid 1 (`netinit`), whose RSS
  each allowlist launch adds, printed only.

Rounds are interleaved so drift hits each side alike; medians.

    uv run python bench/sandbox_overhead.py [--runs N] [--cells N] [--background N] [--gets N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.verdict import Target, report
from eukhe.kernel.session_kernel import KernelSession
from eukhe.records.jobs import Settled
from eukhe.records.sandbox import SandboxPolicy
from eukhe.sandbox import bwrap


def raw(argv: list[str], runs: int, cwd: Path) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        times.append(time.perf_counter() - start)
    return times


async def round_trips(
    call: Callable[[], Awaitable[object]], runs: int, check: Callable[[Settled], bool]
) -> list[float]:
    """`runs` timed calls, each checked."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        answer = await call()
        times.append(time.perf_counter() - start)
        assert isinstance(answer, Settled), answer
        assert check(answer), answer
    return times


async def bash_round_trips(session: KernelSession, runs: int) -> list[float]:
    return await round_trips(lambda: session.execute_bash_and_wait("true", 60_000), runs, lambda a: a.exit_code == 0)


async def cell_round_trips(session: KernelSession, runs: int) -> list[float]:
    return await round_trips(lambda: session.ipython("1 + 1", 60_000), runs, lambda a: a.result == "2")


BACKGROUNDING = "sleep 300 >/dev/null 2>&1 & echo $EPOCHREALTIME"
"""Its shell echoes the wall clock (bash's own, no fork) as its last act, then exits, leaving the sleep running."""


async def background_answers(session: KernelSession, runs: int) -> list[float]:
    """`runs` backgrounding calls: each the time from its shell's exit to its answer (the left job cancelled)."""
    times = []
    for _ in range(runs):
        answer = await session.execute_bash_and_wait(BACKGROUNDING, 60_000)
        answered = time.time()
        assert isinstance(answer, Settled), answer
        assert answer.left_running is not None, answer
        times.append(answered - float(answer.output.text))
        ended = await session.jobs.cancel(answer.left_running)
        assert isinstance(ended, Settled), ended
        assert ended.killed, ended
    return times


async def measure(runs: int, cells: int, root: Path, background: int = 40) -> dict[str, list[float]]:
    cwd = root / "cwd"
    cwd.mkdir()
    confined = await KernelSession.create(cwd, root=root / "sessions", sandbox=SandboxPolicy())
    unconfined = await KernelSession.create(cwd, root=root / "sessions", sandbox=SandboxPolicy(mode="off"))
    try:
        bwrap_argv = confined.sandbox.wrap(["bash", "-c", "true"])
        keys = ("raw", "bwrap", "off", "on", "cell_off", "cell_on", "left_off", "left_on")
        found: dict[str, list[float]] = {key: [] for key in keys}
        await bash_round_trips(confined, 5)  # warm-up
        await bash_round_trips(unconfined, 5)
        await cell_round_trips(confined, 5)
        await cell_round_trips(unconfined, 5)
        rounds = 8
        for _ in range(rounds):
            found["raw"] += raw(["bash", "-c", "true"], runs // rounds, cwd)
            found["bwrap"] += raw(bwrap_argv, runs // rounds, cwd)
            found["off"] += await bash_round_trips(unconfined, runs // rounds)
            found["on"] += await bash_round_trips(confined, runs // rounds)
            found["cell_off"] += await cell_round_trips(unconfined, cells // rounds)
            found["cell_on"] += await cell_round_trips(confined, cells // rounds)
            found["left_off"] += await background_answers(unconfined, background // rounds)
            found["left_on"] += await background_answers(confined, background // rounds)
        return found
    finally:
        await confined.close()
        await unconfined.close()


GETS = """
import http.client, os, statistics, sys, time
port, via, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
times = []
for _ in range(count):
    start = time.perf_counter()
    if via == "proxy":
        conn = http.client.HTTPConnection("127.0.0.1", 3128)
        conn.request("GET", f"http://localhost:{port}/")
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("GET", "/")
    body = conn.getresponse().read()
    conn.close()
    assert body, body
    times.append(time.perf_counter() - start)
rss = [line for line in open("/proc/1/status") if line.startswith("VmRSS")]
print(statistics.median(times) * 1000, rss[0].split()[1] if rss else "nan")
"""
"""A confined job's GETs: the median ms of `count` GETs (fresh connections), and the RSS (kB) of its pid 1."""


async def allowlist_gets(root: Path, gets: int) -> dict[str, float]:
    """The median GET through the proxy (allowlist) and straight (on), from one confined job each, interleaved."""
    from eukhe.sandbox.confine import init_python

    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split(" port ")[1].split()[0])
        cwd = root / "cwd"
        policy = SandboxPolicy(network="allowlist", allow_domains=["localhost"], allow_ports=[port])
        allowed = await KernelSession.create(cwd, root=root / "sessions", sandbox=policy)
        direct = await KernelSession.create(cwd, root=root / "sessions", sandbox=SandboxPolicy())
        found: dict[str, list[float]] = {"proxy": [], "direct": [], "init_kb": []}
        try:
            for _ in range(5):
                for via, session in (("proxy", allowed), ("direct", direct)):
                    command = f"{init_python()} -I -S -c '{GETS}' {port} {via} {gets // 5}"
                    answer = await session.execute_bash_and_wait(command, 120_000)
                    assert isinstance(answer, Settled), answer
                    assert answer.exit_code == 0, answer
                    median, rss = answer.output.text.split()
                    found[via].append(float(median))
                    if via == "proxy":
                        found["init_kb"].append(float(rss))
        finally:
            await allowed.close()
            await direct.close()
        return {key: statistics.median(values) for key, values in found.items()}
    finally:
        server.terminate()
        server.wait()


def proxy_memory_mb(count: int = 20) -> float:
    """The process's RSS grown by starting `count` proxies, over `count` (MB)."""
    from eukhe.core import allowlist
    from eukhe.sandbox.netproxy import NetProxy

    def rss_kb() -> int:
        line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmRSS"))
        return int(line.split()[1])

    with tempfile.TemporaryDirectory() as tmp:
        rules = allowlist.rules(["localhost"], [])
        NetProxy(rules, Path(tmp) / "warm.jsonl").start()  # the first pays for the imports
        before = rss_kb()
        proxies = [NetProxy(rules, Path(tmp) / f"{index}.jsonl") for index in range(count)]
        for proxy in proxies:
            proxy.start()
        grown = rss_kb() - before
        for proxy in proxies:
            proxy.close()
    return grown / count / 1024


def probe_ms(rounds: int = 20) -> float:
    """The start's probe (a fresh run of bwrap with every namespace), median over `rounds`; target < 50 ms."""
    path = bwrap.available().path
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        found = bwrap._run_probe(path)
        times.append(time.perf_counter() - start)
        assert isinstance(found, bwrap.Bubblewrap), found
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--cells", type=int, default=800)
    parser.add_argument("--background", type=int, default=40)
    parser.add_argument("--gets", type=int, default=500)
    args = parser.parse_args()
    os.environ.setdefault("EUKHE_KERNEL_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["EUKHE_CODING_AGENT_DIR"] = str(Path(tmp) / "agent")
        found = asyncio.run(measure(args.runs, args.cells, Path(tmp), args.background))
        gets = asyncio.run(allowlist_gets(Path(tmp), args.gets))
    proxy_mb = proxy_memory_mb()
    ms = {key: statistics.median(values) * 1000 if values else float("nan") for key, values in found.items()}
    for key, label in (
        ("raw", "raw bash -c true"),
        ("bwrap", "raw bwrap <same flags> bash -c true"),
        ("off", "bash true through a session, unconfined"),
        ("on", "bash true through a session, confined"),
        ("cell_off", "cell 1 + 1, unconfined kernel"),
        ("cell_on", "cell 1 + 1, confined kernel"),
        ("left_off", "backgrounding call, its shell's exit to its answer, unconfined"),
        ("left_on", "backgrounding call, its shell's exit to its answer, confined"),
    ):
        print(f"{label}: median {ms[key]:.3f} ms over {len(found[key])} runs")
    bwrap_cost = ms["bwrap"] - ms["raw"]
    added = ms["on"] - ms["off"]
    ratio = added / bwrap_cost if bwrap_cost > 0 else float("inf")
    print(f"bwrap's own cost: {bwrap_cost:.3f} ms; confined - unconfined: {added:.3f} ms")
    print(f"(confined - unconfined) / (raw bwrap - raw): {ratio:.2f} (target <= 1.5)")
    print(f"confined cell / unconfined cell: {ms['cell_on'] / ms['cell_off']:.3f} (target <= 1.1)")
    for mode, left, trip in (("unconfined", "left_off", "off"), ("confined", "left_on", "on")):
        print(f"backgrounding call's exit to answer / bash true round trip, {mode}: {ms[left] / ms[trip]:.2f} x")
    probe = probe_ms()
    print(f"the start's probe: median {probe:.1f} ms (target < 50 ms)")
    bound = 1.5 * gets["direct"] + 2
    print(f"GET to the host's loopback, network on: median {gets['direct']:.3f} ms")
    print(f"GET through the allowlist's proxy: median {gets['proxy']:.3f} ms (target <= {bound:.3f} ms)")
    print(f"allowlist GET / on GET: {gets['proxy'] / gets['direct']:.2f} x")
    print(f"the proxy's memory per session: {proxy_mb:.2f} MB (target <= 10 MB)")
    print(f"the sandbox's pid 1 (netinit) per allowlist launch: {gets['init_kb'] / 1024:.1f} MB RSS")
    report(
        [
            Target("(confined - unconfined) / (raw bwrap - raw), bash true", ratio, "<=", 1.5, "x"),
            Target("confined cell / unconfined cell", ms["cell_on"] / ms["cell_off"], "<=", 1.1, "x"),
            Target("the start's probe, median", probe, "<", 50, "ms"),
            Target("backgrounding call, shell's exit to answer, unconfined", ms["left_off"], "<=", 150, "ms"),
            Target("backgrounding call, shell's exit to answer, confined", ms["left_on"], "<=", 150, "ms"),
            Target("allowlist GET - (1.5 x on GET + 2 ms)", gets["proxy"] - bound, "<=", 0, "ms"),
            Target("the proxy's memory per session", proxy_mb, "<=", 10, "MB"),
        ]
    )


if __name__ == "__main__":
    main()
