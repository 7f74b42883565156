"""Benchmark: stream mixed lines from a child process through BoundedOutput (head and tail) and compare the
throughput with a plain read-and-discard loop over the same kind of pipe, in the same run. Also peak RSS growth.

Targets: throughput ratio >= 0.5 in both modes; peak RSS growth < 3 x max_bytes + 16 MiB.
Run: uv run python bench/bounded_output.py [--size-mib 1024]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.verdict import Target, report

MIB = 1 << 20

WRITER = r"""
import os, sys
lines = []
i = size = 0
while size < (1 << 20):
    lines.append(("x" * (i % 97) + " line %d \u00e9\u20ac\n" % i).encode())
    size += len(lines[-1])
    i += 1
block = b"".join(lines)[: 1 << 20]
total = int(sys.argv[1])
out = os.fdopen(1, "wb", buffering=0)
sent = 0
view = memoryview(block)
while sent < total:
    chunk = view[: min(len(block), total - sent)]
    while chunk:
        n = out.write(chunk)
        chunk = chunk[n:]
    sent += min(len(block), total - sent)
"""

READER = r"""
import json, os, resource, subprocess, sys, time
from pathlib import Path
mode, total, artifact_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with_artifact = mode.endswith("+artifact")
mode = mode.removesuffix("+artifact")
from eukhe.core.bound import DEFAULT_LIMITS, Keep, On, OutputLimits
from eukhe.output import BoundedOutput

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
child = subprocess.Popen([sys.executable, "-c", sys.argv[4], str(total)], stdout=subprocess.PIPE, bufsize=0)
fd = child.stdout.fileno()
try:
    import fcntl
    fcntl.fcntl(fd, 1031, 1 << 20)
except OSError:
    pass
output = None
if mode in ("head", "tail"):
    keep = Keep.HEAD if mode == "head" else Keep.TAIL
    output = BoundedOutput(On(OutputLimits(DEFAULT_LIMITS.max_bytes, DEFAULT_LIMITS.max_lines, keep)),
                           Path(artifact_dir) if with_artifact else None)
read = os.read
sink = None
if mode == "write":
    sink = os.open(os.path.join(artifact_dir, "plain-write"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
started = time.perf_counter()
received = 0
while True:
    data = read(fd, 1 << 20)
    if not data:
        break
    received += len(data)
    if output is not None:
        output.write(data)
    elif sink is not None:
        os.write(sink, data)
if sink is not None:
    os.close(sink)
    os.unlink(os.path.join(artifact_dir, "plain-write"))
result = output.close() if output is not None else None
elapsed = time.perf_counter() - started
child.wait()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert received == total, (received, total)
if result is not None:
    assert result.bytes_kept + result.bytes_dropped == total
    if with_artifact:
        # Within its cap (the default artifact_max_bytes): the whole output, or its head and tail and a marker line.
        from eukhe.core.artifact import kept, shape_of
        from eukhe.output import artifact_max_bytes
        capped = kept(shape_of(artifact_max_bytes()), total)
        assert result.artifact is not None
        size = result.artifact.stat().st_size
        assert size == total if not capped.partial else capped.head + capped.tail < size <= artifact_max_bytes()
        result.artifact.unlink()
print(json.dumps({"mode": mode, "seconds": elapsed, "rss_growth_kib": after - before}))
"""


def measure(mode: str, total: int, artifact_dir: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", READER, mode, str(total), artifact_dir, WRITER],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=1024, help="output size per run (default 1024 = 1 GiB)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best of each mode counts")
    args = parser.parse_args()
    total = args.size_mib * MIB
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as artifact_dir:
        for _ in range(args.rounds):
            for mode in ("discard", "head", "tail", "write", "head+artifact", "tail+artifact"):
                sample = measure(mode, total, artifact_dir)
                if mode not in best or sample["seconds"] < best[mode]["seconds"]:
                    best[mode] = sample
    max_bytes = 51_200
    rss_budget_kib = (3 * max_bytes + 16 * MIB) // 1024
    base = best["discard"]["seconds"]
    targets = []
    print(f"streamed {args.size_mib} MiB per run; plain read-and-discard: {total / base / MIB:.0f} MiB/s")
    for mode in ("head", "tail"):
        ratio = base / best[mode]["seconds"]
        growth = best[mode]["rss_growth_kib"]
        verdict = "ok" if ratio >= 0.5 and growth < rss_budget_kib else "MISSED"
        print(
            f"{mode}: throughput ratio {ratio:.2f} (target >= 0.5), peak RSS growth {growth:.0f} KiB "
            f"(budget {rss_budget_kib} KiB) [{verdict}]"
        )
        targets.append(Target(f"{mode}: throughput / read-and-discard", ratio, ">=", 0.5, "x"))
        targets.append(Target(f"{mode}: peak RSS growth", growth, "<", rss_budget_kib, "KiB"))
    # Past its limits BoundedOutput also writes every byte to the artifact: that costs what the disk costs.
    disk = best["write"]["seconds"]
    print(
        f"plain read-and-write-to-a-file (the disk's share): {total / disk / MIB:.0f} MiB/s, "
        f"ratio {base / disk:.2f} of read-and-discard"
    )
    for mode in ("head+artifact", "tail+artifact"):
        print(
            f"{mode}: ratio {base / best[mode]['seconds']:.2f} of read-and-discard, "
            f"{disk / best[mode]['seconds']:.2f} of read-and-write-to-a-file; "
            f"peak RSS growth {best[mode]['rss_growth_kib']:.0f} KiB"
        )
    report(targets)


if __name__ == "__main__":
    main()
