"""Benchmark: a cell round trip (`1 + 1`) and an `rlm.fs.read` of a 1 MiB file, through bubblewrap
and through ssh to an sshd on 127.0.0.1, against the Local transport, in one run. Every kernel runs on the same
interpreter (/usr/bin/python3, which has no eukhe: the wrapped ones get the stub over stdin). Prints medians and
the ratios (targets: bwrap at most 1.2x Local; ssh at most Local + 1 ms per round trip). ssh runs twice: with its
default cipher (chacha20-poly1305) and with `-c aes128-gcm@openssh.com` (`ssh-gcm`), which moves a megabyte for
about half the cost on a CPU with AES instructions (docs/transports.md). A cell's large read comes by reference
(docs/fs.md): the kernel reads the bytes through its mount; the same read with its text over the pipe (the request a
kernel falls back to) is printed beside it, without a target. Needs root.

    uv run python bench/transport_roundtrip.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's tests/ helpers (an sshd of its own)

from bench.verdict import Target, report
from eukhe.api import Session, SessionSettings, Settled
from eukhe.records.settings import KernelTransport, Mount
from tests.real.sandboxes import SANDBOX_PYTHON, bind_mount, sshd

MIB = 1 << 20


INLINE_READ = "len(rlm.fs._ask('fs.read', {'path': 'big.txt', 'offset': None, 'limit': None}).text)"
"""The read a kernel falls back to when its mount does not show the host's bytes: the text over the pipe."""


READ = "len(rlm.fs.read('big.txt').text)"
"""A cell's read of the megabyte (by reference: the kernel reads the bytes through its mount)."""
CELL = "1 + 1"


async def timed(session: Session, code: str, result: str) -> float:
    """One cell round trip of `code`, in seconds (its answer checked)."""
    start = time.perf_counter()
    answer = await session.ipython(code)
    took = time.perf_counter() - start
    assert isinstance(answer, Settled), answer
    assert answer.result == result, answer
    return took


async def measure(
    work: Path, root: Path, transports: dict[str, KernelTransport | None], runs: int
) -> dict[tuple[str, str], list[float]]:
    """Times in seconds by (transport, what): one session per transport, all open at once, and each measurement
    taken on every transport in turn, so the machine's drift (load, caches, clock speed) hits them alike."""
    os.environ["EUKHE_KERNEL_PYTHON"] = SANDBOX_PYTHON
    settings = SessionSettings(truncation="off")
    sessions: dict[str, Session] = {}
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for name, transport in transports.items():
            sessions[name] = await Session.create(work, root=root, settings=settings, kernel_transport=transport)
            await sessions[name].ipython("1")  # the kernel is up
        plan = [(CELL, "2", runs), (READ, str(MIB), max(5, runs // 5)), (INLINE_READ, str(MIB), max(5, runs // 5))]
        for code, result, count in plan:
            for _ in range(count):
                for name, session in sessions.items():
                    times.setdefault((name, code), []).append(await timed(session, code, result))
        return times
    finally:
        for session in sessions.values():
            await session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="cell round trips per transport (reads: a fifth)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("this benchmark needs root (bubblewrap, a bind mount, an sshd of its own)")
    with tempfile.TemporaryDirectory(prefix="eukhe-bench-") as scratch, contextlib.ExitStack() as stack:
        base = Path(scratch)
        work = base / "work"
        work.mkdir()
        (work / "big.txt").write_text(("x" * 1023 + "\n") * 1024)
        remote = stack.enter_context(bind_mount(work, base / "remote"))
        server = stack.enter_context(sshd(base / "sshd"))
        bwrap_prefix = [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--bind",
            str(work),
            "/work",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        bwrap_prefix += ["--tmpfs", "/tmp", "--die-with-parent"]
        transports: dict[str, KernelTransport | None] = {
            "local": None,
            "bwrap": KernelTransport(
                argv_prefix=bwrap_prefix, python=SANDBOX_PYTHON, path_map=[Mount(sandbox="/work", host=str(work))]
            ),
            "ssh": KernelTransport(
                argv_prefix=server.argv_prefix,
                python=SANDBOX_PYTHON,
                command="shell",
                path_map=[Mount(sandbox=str(remote), host=str(work))],
            ),
            # The same with ssh's AES-GCM cipher (AES instructions): a megabyte costs ssh about half as much here.
            "ssh-gcm": KernelTransport(
                argv_prefix=[*server.argv_prefix[:-1], "-c", "aes128-gcm@openssh.com", server.argv_prefix[-1]],
                python=SANDBOX_PYTHON,
                command="shell",
                path_map=[Mount(sandbox=str(remote), host=str(work))],
            ),
        }
        times = asyncio.run(measure(work, base / "sessions", transports, args.runs))
    median = {name: statistics.median(times[name, CELL]) * 1000 for name in transports}
    read = {name: statistics.median(times[name, READ]) * 1000 for name in transports}
    inline = {name: statistics.median(times[name, INLINE_READ]) * 1000 for name in transports}
    for name in transports:
        print(
            f"{name:8} cell round trip: median {median[name]:.3f} ms; fs.read 1 MiB: median {read[name]:.2f} ms "
            f"(text over the pipe: {inline[name]:.2f} ms)"
        )
    print(f"bwrap / local, cell round trip: {median['bwrap'] / median['local']:.2f} (target <= 1.2)")
    print(f"bwrap / local, fs.read 1 MiB: {read['bwrap'] / read['local']:.2f} (target <= 1.2)")
    print(f"ssh - local, cell round trip: {median['ssh'] - median['local']:+.3f} ms (target <= +1 ms)")
    print(f"ssh - local, fs.read 1 MiB: {read['ssh'] - read['local']:+.2f} ms (target <= +1 ms)")
    print(f"ssh-gcm - local, cell round trip: {median['ssh-gcm'] - median['local']:+.3f} ms (target <= +1 ms)")
    print(f"ssh-gcm - local, fs.read 1 MiB: {read['ssh-gcm'] - read['local']:+.2f} ms (target <= +1 ms)")
    for name in ("ssh", "ssh-gcm"):
        over = inline[name] - inline["local"]
        print(f"{name} - local, fs.read 1 MiB with the text over the pipe: {over:+.2f} ms (the fallback; no target)")
    targets = [
        Target("bwrap / local, cell round trip", median["bwrap"] / median["local"], "<=", 1.2, "x"),
        Target("bwrap / local, fs.read 1 MiB", read["bwrap"] / read["local"], "<=", 1.2, "x"),
    ]
    for name in ("ssh", "ssh-gcm"):
        targets.append(Target(f"{name} - local, cell round trip", median[name] - median["local"], "<=", 1, "ms"))
        targets.append(Target(f"{name} - local, fs.read 1 MiB", read[name] - read["local"], "<=", 1, "ms"))
    report(targets)


if __name__ == "__main__":
    main()
