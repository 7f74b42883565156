"""The supervisor keeps one connection per worker for the next request (a connect and the worker's peer
check cost about a third of a millisecond of every forwarded call): sequential requests reuse it, a cancelled one
never leaves its connection for the next, and a worker that dies takes its kept connection with it (no fd of it is
left in the supervisor, and the next request reopens the session).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from eukhe.daemon.client import DaemonClient
from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real


def sockets_of(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def accepted_on(path: str) -> set[str]:
    """The inodes of the connected sockets a listener at `path` accepted (/proc/net/unix names them by its path)."""
    found = set()
    with open("/proc/net/unix", encoding="utf-8") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if len(fields) == 8 and fields[7] == path and fields[5] == "03":  # 03: connected
                found.add(fields[6])
    return found


def settled(read: object, timeout_s: float = 10.0) -> object:
    """`read()` once it gives the same answer twice 50 ms apart (bounded)."""
    deadline = time.monotonic() + timeout_s
    last = read()  # type: ignore[operator]
    while time.monotonic() < deadline:
        time.sleep(0.05)  # bounded settle of a real process's fds
        now = read()  # type: ignore[operator]
        if now == last:
            return now
        last = now
    return last


def test_sequential_requests_reuse_one_kept_connection_to_the_worker(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    with DaemonClient.connect(world.socket) as client:
        status = client.call("status")
        supervisor = status["pid"]
        ((worker, path),) = [(row["pid"], row["socket"]) for row in status["workers"] if row["session"] == session]
        client.call("bash", {"session": session, "command": "true"})
        kept = settled(lambda: accepted_on(path))
        assert len(kept) == 1  # type: ignore[arg-type]  # one connection from the supervisor, open between requests
        for _ in range(20):
            assert client.call("bash", {"session": session, "command": "true"})["exit_code"] == 0
        # The same one: no new connection was accepted for the twenty requests.
        assert settled(lambda: accepted_on(path)) == kept
        before_death = settled(lambda: sockets_of(supervisor))
        os.kill(worker, signal.SIGKILL)
        # The next request reopens the session in a new worker (and may first meet the dead one: worker_died).
        deadline = time.monotonic() + 30
        while True:
            try:
                client.call("bash", {"session": session, "command": "true"})
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # bounded wait for the reopen
        # The dead worker's kept connection is closed: the supervisor holds as many sockets as before (one kept
        # connection to the new worker in place of the one to the old).
        assert len(settled(lambda: sockets_of(supervisor))) == len(before_death)  # type: ignore[arg-type]
