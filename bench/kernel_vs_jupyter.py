"""Benchmark: the eukhe kernel against Jupyter (jupyter_client + ipykernel), measured in one run on this machine.

Installs jupyter_client and ipykernel into a throwaway venv under a temporary directory (uv, else python -m venv +
pip), then measures both kernels the same way and prints the ratios (eukhe / jupyter; lower is better):
- start: launch to the first `1+1` reply, median of 5 starts (target <= 0.1)
- rtt: `1+1` round trip, median and p99           (target <= 0.05)
- interrupt: interrupt sent to the cell's reply   (target <= 0.1)
- prints: N `print` lines, to the last byte       (target: < 1)

    uv run python bench/kernel_vs_jupyter.py            # full: 500 round trips, 1M prints
    uv run python bench/kernel_vs_jupyter.py --quick    # scaled down
"""

from __future__ import annotations

import argparse
import asyncio
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

JUPYTER_SIDE = r"""
import json, statistics, sys, time
from jupyter_client.manager import KernelManager


rounds, interrupts, prints, starts = map(int, sys.argv[1:5])

def reply_for(kc, msg_id):
    while True:
        msg = kc.get_shell_msg(timeout=120)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg

def idle_for(kc, msg_id, on_msg=None):
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if on_msg is not None:
            on_msg(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return

def started():
    t0 = time.perf_counter()
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    reply_for(kc, kc.execute("1+1"))
    return time.perf_counter() - t0, km, kc

start_times = []
for _ in range(starts - 1):
    elapsed, km, kc = started()
    start_times.append(elapsed)
    kc.stop_channels()
    km.shutdown_kernel(now=True)
elapsed, km, kc = started()
start_times.append(elapsed)
start = statistics.median(start_times)

rtts = []
for _ in range(rounds):
    t = time.perf_counter()
    msg_id = kc.execute("1+1")
    reply_for(kc, msg_id)
    rtts.append(time.perf_counter() - t)
    idle_for(kc, msg_id)

lat = []
for _ in range(interrupts):
    msg_id = kc.execute("print('go', flush=True)\nwhile True:\n    pass")
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            break
    t = time.perf_counter()
    km.interrupt_kernel()
    reply_for(kc, msg_id)
    lat.append(time.perf_counter() - t)
    idle_for(kc, msg_id)

got = [0]
def count(msg):
    if msg["msg_type"] == "stream":
        got[0] += len(msg["content"]["text"])
t = time.perf_counter()
msg_id = kc.execute(f"for i in range({prints}):\n    print(i)")
idle_for(kc, msg_id, count)
reply_for(kc, msg_id)
printing = time.perf_counter() - t
expected = sum(len(f"{i}\n") for i in range(prints))
kc.stop_channels()
km.shutdown_kernel(now=True)
print(json.dumps({"start": start, "rtts": rtts, "interrupts": lat, "prints": printing, "print_bytes": got[0],
                  "expected_bytes": expected}))
"""


def make_jupyter_venv(root: Path) -> Path:
    """A throwaway venv with jupyter_client and ipykernel from PyPI; answers its python."""
    venv = root / "venv"
    python = venv / "bin" / "python"
    uv = shutil.which("uv")
    if uv:
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(python), "jupyter_client", "ipykernel"], check=True)
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "jupyter_client", "ipykernel"], check=True)
    return python


def measure_jupyter(python: Path, rounds: int, interrupts: int, prints: int, starts: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    done = subprocess.run(
        [str(python), "-c", JUPYTER_SIDE, str(rounds), str(interrupts), str(prints), str(starts)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def measure_eukhe(rounds: int, interrupts: int, prints: int, starts: int) -> dict[str, Any]:
    from eukhe.core.bound import DEFAULT_TRUNCATION
    from eukhe.kernel.manager import KernelManager

    start_times = []
    for _ in range(starts - 1):
        t0 = time.perf_counter()
        async with KernelManager(truncation=DEFAULT_TRUNCATION) as km:
            await km.run("1+1")
            start_times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    async with KernelManager(truncation=DEFAULT_TRUNCATION) as km:
        await km.run("1+1")
        start_times.append(time.perf_counter() - t0)
        start = statistics.median(start_times)
        rtts = []
        for _ in range(rounds):
            t = time.perf_counter()
            await km.run("1+1")
            rtts.append(time.perf_counter() - t)
        latencies = []
        for _ in range(interrupts):
            cell = await km.execute("print('go')\nwhile True:\n    pass")
            while b"go" not in cell.output.snapshot().text:
                await asyncio.sleep(0.001)
            t = time.perf_counter()
            await km.interrupt()
            await cell.wait()
            latencies.append(time.perf_counter() - t)
        t = time.perf_counter()
        outcome = await km.run(f"for i in range({prints}):\n    print(i)")
        printing = time.perf_counter() - t
        got = outcome.output.bytes_kept + outcome.output.bytes_dropped
    expected = sum(len(f"{i}\n") for i in range(prints))
    return {
        "start": start,
        "rtts": rtts,
        "interrupts": latencies,
        "prints": printing,
        "print_bytes": got,
        "expected_bytes": expected,
    }


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 round trips, 3 interrupts, 100k prints")
    parser.add_argument("--jupyter-python", help="use this python (with jupyter_client + ipykernel) instead")
    args = parser.parse_args()
    rounds, interrupts, prints, starts = (100, 3, 100_000, 1) if args.quick else (500, 10, 1_000_000, 5)
    with tempfile.TemporaryDirectory(prefix="eukhe-bench-") as tmp:
        python = Path(args.jupyter_python) if args.jupyter_python else make_jupyter_venv(Path(tmp))
        jupyter = measure_jupyter(python, rounds, interrupts, prints, starts)
    eukhe = asyncio.run(measure_eukhe(rounds, interrupts, prints, starts))
    for side, data in (("jupyter", jupyter), ("eukhe", eukhe)):
        assert data["print_bytes"] == data["expected_bytes"], f"{side} lost output: {data['print_bytes']}"
    rows = [
        ("start to first reply (median)", jupyter["start"], eukhe["start"], 0.1),
        ("1+1 round trip median", statistics.median(jupyter["rtts"]), statistics.median(eukhe["rtts"]), 0.05),
        ("1+1 round trip p99", p99(jupyter["rtts"]), p99(eukhe["rtts"]), 0.05),
        (
            "interrupt latency median",
            statistics.median(jupyter["interrupts"]),
            statistics.median(eukhe["interrupts"]),
            0.1,
        ),
        (f"{prints:,} print lines", jupyter["prints"], eukhe["prints"], 1.0),
    ]
    print(f"{'measure':28} {'jupyter':>12} {'eukhe':>12} {'ratio':>8} {'target':>8}")
    targets = []
    for name, theirs, ours, target in rows:
        ratio = ours / theirs
        verdict = "ok" if ratio <= target else "MISSED"
        print(f"{name:28} {theirs * 1000:10.3f}ms {ours * 1000:10.3f}ms {ratio:8.4f} {'<=' + str(target):>8} {verdict}")
        targets.append(Target(f"{name}, eukhe / jupyter", ratio, "<=" if target < 1 else "<", target, "x"))
    report(targets)


if __name__ == "__main__":
    main()
