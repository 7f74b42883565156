"""Benchmark: many sessions on one machine, in one run, against `tmux new-session -d` x N.

With a warm daemon (its fork server ready), it:

1. creates N sessions (100) and prints the median and p99 create time (target: median <= 50 ms);
2. runs one `bash true` in each, one after another, then N at once from N clients (throughput);
3. reports the daemon's total PSS (supervisor, fork server, workers: shared pages counted once) with N idle
   sessions (target: <= 1 GiB);
4. opens a kernel in K of them (20; `--kernels 100` for the "100 sessions with a kernel each <= 3 GiB" target) and
   reports the PSS again, kernels included;
5. sets the idle timeouts to 1 s (the user settings file, which the daemon reads again within 10 s), waits until
   every session and kernel is culled, and reports the PSS again, against the daemon's own PSS before any session
   (target: back to it);
6. runs `tmux new-session -d` N times on a private tmux server (installed here first when missing: apt-get) and
   prints its median and p99 and its server's total PSS (its N shells included).

It also measures the two other ways a session could start, for the record of the choice (the daemon forks workers
from its warm fork server): workers started as fresh Pythons (`EUKHE_WORKER_START=exec`, `--exec-sessions` of them:
the way before), and sessions hosted together in one process (`--together` of them, created with the Python API in
one fresh process: what hosting every session in the supervisor would cost, without a crash of one taking only its
own). Kernels run on this interpreter (`EUKHE_KERNEL_PYTHON`), as in the test suite. Everything runs in a private
TMPDIR and agent dir, and the daemons it starts are stopped. `--quick` runs 20 sessions.

    uv run python bench/many_sessions.py [--sessions 100] [--kernels 20] [--quick]
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
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from bench.verdict import Target, report
from eukhe.daemon.client import DaemonClient, start_daemon

MIB = 1 << 20


def pss_bytes(pids: Iterable[int]) -> int:
    """The summed proportional set size of these processes (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def tree(pid: int) -> list[int]:
    """A process and all its descendants."""
    try:
        root = psutil.Process(pid)
        return [pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:7.2f} ms, p99 {quantile(values, 0.99) * 1000:7.2f} ms"


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


class World:
    """A private TMPDIR and agent dir, and a daemon in them."""

    def __init__(self, root: Path, name: str, extra_env: dict[str, str] | None = None) -> None:
        self.root = root / name
        (self.root / "t").mkdir(parents=True, mode=0o700)
        (self.root / "agent").mkdir(mode=0o700)
        self.project = self.root / "project"
        self.project.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EUKHE_")}
        self.env.update(
            TMPDIR=str(self.root / "t"),
            EUKHE_CODING_AGENT_DIR=str(self.root / "agent"),
            EUKHE_KERNEL_PYTHON=sys.executable,
            **(extra_env or {}),
        )
        self.socket = self.root / "t" / f"eukhe-{os.getuid()}" / "daemon.sock"
        self.settings({"session_idle_timeout_s": 3600, "kernel_idle_timeout_s": 0})

    def settings(self, values: dict[str, Any]) -> None:
        (self.root / "agent" / "settings.json").write_text(json.dumps(values))

    def start(self) -> DaemonClient:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            return start_daemon(str(self.socket))
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def stop(self) -> None:
        try:
            with DaemonClient.connect(str(self.socket)) as client:
                pid = client.call("ping")["pid"]
                client.call("stop")
        except OSError:
            return
        deadline = time.monotonic() + 30
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)


def wait_fork_server(client: DaemonClient, timeout_s: float = 60) -> None:
    """Until the daemon's fork server is ready (a create waits for it; so does this, before timing creates)."""
    deadline = time.monotonic() + timeout_s
    while client.call("status").get("fork_server") is None and time.monotonic() < deadline:
        time.sleep(0.05)


def bench_daemon(root: Path, sessions: int, kernels: int) -> dict[str, Any]:
    world = World(root, "fork")
    client = world.start()
    result: dict[str, Any] = {}
    try:
        daemon = client.call("ping")["pid"]
        wait_fork_server(client)
        warm = client.call("session.create", {"cwd": str(world.project)})["id"]
        client.call("session.delete", {"session": warm})
        time.sleep(1.0)  # let the warm-up's worker be reaped and the fork server settle before the baseline
        result["baseline_pss"] = pss_bytes(tree(daemon))

        creates: list[float] = []
        ids: list[str] = []
        for _ in range(sessions):
            start = time.perf_counter()
            ids.append(client.call("session.create", {"cwd": str(world.project)})["id"])
            creates.append(time.perf_counter() - start)
        result["creates"] = creates

        sequential = [timed(lambda s=s: client.call("bash", {"session": s, "command": "true"})) for s in ids]
        result["bash_sequential"] = sequential
        barrier = threading.Barrier(len(ids) + 1)
        failures: list[BaseException] = []

        def one(session: str) -> None:
            try:
                with DaemonClient.connect(str(world.socket)) as own:
                    barrier.wait()
                    own.call("bash", {"session": session, "command": "true"})
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=one, args=(s,)) for s in ids]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        result["bash_concurrent_s"] = time.perf_counter() - start
        result["bash_concurrent_failures"] = len(failures)

        time.sleep(0.5)
        status = client.call("status")
        result["workers"] = len(status["workers"])
        result["idle_pss"] = pss_bytes(tree(daemon))
        result["fork_server_pss"] = pss_bytes([status["fork_server"]]) if status["fork_server"] else 0
        result["supervisor_pss"] = pss_bytes([daemon])
        worker_pss = [pss_bytes([w["pid"]]) for w in status["workers"]]
        result["worker_pss_median"] = statistics.median(worker_pss)

        kernel_starts = [
            timed(lambda s=s: client.call("ipython", {"session": s, "code": "1 + 1"})) for s in ids[:kernels]
        ]
        result["kernel_starts"] = kernel_starts
        time.sleep(0.5)
        result["kernel_pss"] = pss_bytes(tree(daemon))
        result["kernels"] = kernels

        world.settings({"session_idle_timeout_s": 1, "kernel_idle_timeout_s": 1})
        start = time.perf_counter()
        deadline = time.monotonic() + 120
        while client.call("status")["workers"] and time.monotonic() < deadline:
            time.sleep(0.2)
        result["cull_s"] = time.perf_counter() - start
        status = client.call("status")
        result["left_after_cull"] = len(status["workers"])
        result["culled_sessions"] = result["workers"] - result["left_after_cull"]
        time.sleep(1.0)
        result["culled_pss"] = pss_bytes(tree(daemon))
    finally:
        client.close()
        world.stop()
    return result


def bench_exec(root: Path, sessions: int) -> dict[str, Any]:
    """Workers started as fresh Pythons (the way before the fork server)."""
    world = World(root, "exec", {"EUKHE_WORKER_START": "exec"})
    client = world.start()
    try:
        daemon = client.call("ping")["pid"]
        client.call("session.delete", {"session": client.call("session.create", {"cwd": str(world.project)})["id"]})
        creates = [timed(lambda: client.call("session.create", {"cwd": str(world.project)})) for _ in range(sessions)]
        time.sleep(0.5)
        status = client.call("status")
        worker_pss = [pss_bytes([w["pid"]]) for w in status["workers"]]
        return {"creates": creates, "worker_pss_median": statistics.median(worker_pss), "pss": pss_bytes(tree(daemon))}
    finally:
        client.close()
        world.stop()


TOGETHER = """
import asyncio, json, os, statistics, sys, time
from pathlib import Path
from eukhe.api import Session

def pss():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024

async def main(count, root, project):
    warm = await Session.create(project, root=root)
    await warm.execute_bash_and_wait("true")
    before = pss()
    sessions, creates = [], []
    for _ in range(count):
        start = time.perf_counter()
        sessions.append(await Session.create(project, root=root))
        creates.append(time.perf_counter() - start)
    for session in sessions:
        await session.execute_bash_and_wait("true")
    after = pss()
    for session in [warm, *sessions]:
        await session.close()
    print(json.dumps({"creates": creates, "before": before, "after": after}))

asyncio.run(main(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
"""


def bench_together(root: Path, sessions: int) -> dict[str, Any]:
    """Sessions hosted together: N sessions of the Python API in one fresh process."""
    world = World(root, "together")
    done = subprocess.run(
        [sys.executable, "-c", TOGETHER, str(sessions), str(world.root / "agent" / "sessions"), str(world.project)],
        env=world.env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def ensure_tmux() -> str | None:
    """tmux, installed here (apt-get) when it is missing; None when it cannot be."""
    found = shutil.which("tmux")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is not None:
        prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run([*prefix, apt, "install", "-y", "-qq", "tmux"], env=env, capture_output=True, check=False)
    return shutil.which("tmux")


def bench_tmux(root: Path, sessions: int) -> dict[str, Any] | None:
    tmux = ensure_tmux()
    if tmux is None:
        return None
    sock = str(root / "tmux.sock")
    env = {**os.environ, "TMUX_TMPDIR": str(root)}
    env.pop("TMUX", None)

    def new_session() -> None:
        subprocess.run([tmux, "-S", sock, "new-session", "-d"], env=env, check=True, cwd=root)

    try:
        new_session()  # the server starts with the first session: not timed
        creates = [timed(new_session) for _ in range(sessions)]
        time.sleep(0.5)
        server = int(
            subprocess.run(
                [tmux, "-S", sock, "display-message", "-p", "#{pid}"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        return {"creates": creates, "pss": pss_bytes(tree(server)), "processes": len(tree(server))}
    finally:
        subprocess.run([tmux, "-S", sock, "kill-server"], env=env, capture_output=True, check=False)


def mib(value: float) -> str:
    return f"{value / MIB:8.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--exec-sessions", type=int, default=10, help="sessions whose workers start as fresh Pythons")
    parser.add_argument("--together", type=int, default=100, help="sessions hosted together in one process")
    parser.add_argument("--quick", action="store_true", help="20 sessions, 5 kernels, 5 fresh-Python workers")
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.kernels, args.exec_sessions, args.together = 20, 5, 5, 20
    root = Path(tempfile.mkdtemp(prefix="ekms", dir="/tmp"))
    try:
        fork = bench_daemon(root, args.sessions, min(args.kernels, args.sessions))
        plain = bench_exec(root, args.exec_sessions)
        together = bench_together(root, args.together)
        tmux = bench_tmux(root, args.sessions)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    n = args.sessions
    print(f"== {n} sessions, a warm daemon (workers forked by its fork server) ==")
    median_create = statistics.median(fork["creates"])
    verdict = "ok" if median_create <= 0.050 else "OVER"
    print(f"session create:                 {ms(fork['creates'])}   (target: median <= 50 ms: {verdict})")
    print(f"bash true in each, in turn:     {ms(fork['bash_sequential'])}")
    rate = n / fork["bash_concurrent_s"]
    failures = fork["bash_concurrent_failures"]
    print(f"bash true in all at once:       {fork['bash_concurrent_s']:.2f} s, {rate:.0f} calls/s ({failures} failed)")
    print(f"daemon PSS before any session:  {mib(fork['baseline_pss'])}")
    idle = fork["idle_pss"]
    print(
        f"daemon PSS, {fork['workers']} idle sessions:   {mib(idle)}   (target <= 1024 MiB:"
        f" {'ok' if idle <= 1 << 30 else 'OVER'}; supervisor {fork['supervisor_pss'] / MIB:.1f}, fork server"
        f" {fork['fork_server_pss'] / MIB:.1f}, a worker {fork['worker_pss_median'] / MIB:.1f} MiB median)"
    )
    k = fork["kernels"]
    per_kernel = (fork["kernel_pss"] - idle) / k if k else 0.0
    print(f"kernel start (first cell):      {ms(fork['kernel_starts'])}" if k else "no kernels")
    projected = idle + n * per_kernel
    print(
        f"daemon PSS, {k} with a kernel:   {mib(fork['kernel_pss'])}   ({per_kernel / MIB:.1f} MiB a kernel; {n}"
        f" sessions with a kernel each: {projected / MIB:.0f} MiB, target <= 3072 MiB:"
        f" {'ok' if projected <= 3 << 30 else 'OVER'}{'' if k == n else ', projected'})"
    )
    back = fork["culled_pss"]
    print(
        f"daemon PSS after culling:       {mib(back)}   ({fork['culled_sessions']} sessions culled in"
        f" {fork['cull_s']:.1f} s, {fork['left_after_cull']} left; {back / fork['baseline_pss']:.2f}x its PSS before"
        " any session)"
    )
    print("== the other ways, for the choice ==")
    print(
        f"fresh-Python workers (before):  {ms(plain['creates'])}, a worker {plain['worker_pss_median'] / MIB:.1f} MiB"
        f" PSS ({len(plain['creates'])} sessions)"
    )
    together_per = (together["after"] - together["before"]) / max(1, len(together["creates"]))
    print(
        f"hosted together in one process: {ms(together['creates'])}, {together_per / 1024:.0f} KiB a session"
        f" ({len(together['creates'])} sessions; one process: a crash ends them all)"
    )
    if tmux is None:
        print("tmux: not installed and could not be installed; no comparison")
    else:
        print("== tmux on the same machine ==")
        print(f"tmux new-session -d:            {ms(tmux['creates'])}")
        print(
            f"tmux server PSS, {n} sessions:  {mib(tmux['pss'])}   ({tmux['processes']} processes: server and shells)"
        )
        ratio = statistics.median(fork["creates"]) / statistics.median(tmux["creates"])
        print(f"create, eukhe / tmux:           {ratio:.2f}x (median); PSS, eukhe / tmux: {idle / tmux['pss']:.2f}x")
    projection = "" if k == n else ", projected"
    report(
        [
            Target("session create, median", median_create * 1000, "<=", 50, "ms"),
            Target(f"daemon PSS, {n} idle sessions", idle / MIB, "<=", 1024, "MiB"),
            Target(f"daemon PSS, {n} sessions with a kernel each{projection}", projected / MIB, "<=", 3072, "MiB"),
        ]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
