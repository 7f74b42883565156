"""Limits, for real (docs/sandbox.md "Limits"): a fork bomb and a memory hog in one confined session, under the
daemon, while another session keeps answering; each ends with the hint naming its limit, the daemon stays up, and
nothing of them is left.

Every test here is safe even if the limit did not hold (that is how a broken limit is caught, not by the machine
falling over): the bomb stops itself after `BOMB_FORKS` forks or `BOMB_S` seconds (each child sleeps, then exits,
so at most `BOMB_FORKS` small processes live at once; it ends them before it exits), and the hog allocates twice a
small limit (256 MiB).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from eukhe.core import limits as core
from eukhe.sandbox import tmpfs
from eukhe.sandbox.limits import hierarchies
from tests.real.conftest import DaemonEnv
from tests.real.test_sandbox_jobs import tagged

pytestmark = pytest.mark.real

MAX_PROCESSES = 48
MAX_MEMORY_MB = 128
BOMB_FORKS = 400
"""The bomb's own guard: it never forks more than this, limit or not."""
BOMB_S = 20
"""And it stops forking after this long; each child sleeps at most this long."""
ANSWER_S = 30.0
"""The other session's `echo` answers within this, bomb or not (a generous bound, not a timing)."""

BOMB = f"""
import os, signal, time
end = time.monotonic() + {BOMB_S}
children = []
refused = None
while len(children) < {BOMB_FORKS} and time.monotonic() < end:
    try:
        pid = os.fork()
    except OSError as error:
        refused = error
        break
    if pid == 0:
        time.sleep(max(0.0, end - time.monotonic()))
        os._exit(0)
    children.append(pid)
print("forked", len(children), flush=True)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
if refused is not None:
    raise refused
"""
HOG = f"python3 -c 'data = b\"x\" * ({2 * MAX_MEMORY_MB} << 20); print(len(data))'"


def groups_offered() -> bool:
    """Whether this machine lets eukhe make control groups with pids and memory (root, or a delegated subtree)."""
    found = {name for _, path, names in hierarchies() if os.access(path, os.W_OK) for name in names}
    return {"pids", "memory"} <= found


def configure(world: DaemonEnv, **limits: int) -> None:
    world.agent_dir.mkdir(mode=0o700, exist_ok=True)
    (world.agent_dir / "settings.json").write_text(json.dumps({"limits": limits}))


def bomb_command(tag: str) -> str:
    """The bomb, its processes tagged (`tagged` finds them by their environment)."""
    return f"export SANDBOX_TEST_TAG={tag}; python3 -c '{BOMB}'"


def answered(world: DaemonEnv, session: str, job: str) -> dict[str, Any]:
    answer: dict[str, Any] = world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "60000", timeout=90)
    assert answer["status"] == "settled", answer
    return answer


@pytest.mark.skipif(not groups_offered(), reason="no control group eukhe may make here (see docs/sandbox.md)")
def test_a_fork_bomb_and_a_memory_hog_are_bounded_while_another_session_answers(
    world: DaemonEnv, tmp_path: Path
) -> None:
    configure(world, max_processes=MAX_PROCESSES, max_memory_mb=MAX_MEMORY_MB)
    bombed = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    other = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    baseline = time.monotonic()
    assert world.json("bash", "--session", other, "--", "echo before")["output"]["text"] == "before\n"
    baseline = time.monotonic() - baseline

    tag = f"bomb{os.getpid()}x{time.monotonic_ns()}"
    bomb = world.json("bash", "--session", bombed, "--budget-ms", "0", "--", bomb_command(tag))
    assert bomb["status"] == "detached"
    started = time.monotonic()
    echo = world.json("bash", "--session", other, "--", "echo during", timeout=ANSWER_S)
    took = time.monotonic() - started
    assert echo["output"]["text"] == "during\n"
    assert took < max(ANSWER_S, 20 * baseline)

    ended = answered(world, bombed, bomb["job"])
    text = ended["output"]["text"]
    forked = int(text.split("forked", 1)[1].split()[0])
    assert forked < MAX_PROCESSES, f"the bomb forked {forked} times: the limit did not hold"
    assert ended["exit_code"] == 1
    assert ended["refusal"]["rule"] == "limits.max_processes", ended
    assert ended["refusal"]["hint"].startswith(f"limit reached (limits.max_processes = {MAX_PROCESSES}, ")

    hog = world.json("bash", "--session", bombed, "--", HOG, timeout=90)
    assert hog["exit_code"] == core.SIGKILL_EXIT, hog
    assert hog["refusal"]["rule"] == "limits.max_memory_mb", hog
    assert "OOM killer" in hog["refusal"]["hint"]

    assert world.json("bash", "--session", bombed, "--", "echo after")["output"]["text"] == "after\n"
    assert world.daemon_pid() is not None  # the daemon stays up
    deadline = time.monotonic() + BOMB_S + 10
    while tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)  # the bomb's children sleep out their guard at most
    assert tagged(tag) == []


@pytest.mark.skipif(not groups_offered(), reason="no control group eukhe may make here (see docs/sandbox.md)")
def test_a_session_closing_ends_what_is_left_in_its_groups_and_removes_them(world: DaemonEnv, tmp_path: Path) -> None:
    configure(world, max_processes=MAX_PROCESSES)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    line = world.json("bash", "--session", session, "--", "grep pids /proc/self/cgroup")["output"]["text"]
    name = line.strip().rsplit("/", 1)[1]
    assert name.startswith("eukhe-") and name.endswith(session[-12:]), line
    paths = [os.path.join(path, name) for _, path, names in hierarchies() if "pids" in names]
    assert any(os.path.isdir(path) for path in paths)
    world.cli("session", "close", session)
    world.stop()
    assert not any(os.path.isdir(path) for path in paths)


def test_one_file_past_max_tmp_mb_is_cut_and_named(world: DaemonEnv, tmp_path: Path) -> None:
    """RLIMIT_FSIZE holds wherever eukhe runs: a write past it fails, and the answer names the limit."""
    configure(world, max_tmp_mb=2)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    answer = world.json("bash", "--session", session, "--", "head -c 5M /dev/zero > /tmp/big")
    assert answer["exit_code"] != 0
    assert answer["refusal"]["rule"] == "limits.max_tmp_mb", answer
    size = world.json("bash", "--session", session, "--", "stat -c %s /tmp/big")["output"]["text"]
    assert int(size) == 2 << 20
    failed = world.json("bash", "--session", session, "--", "head -c 1M /dev/zero > /tmp/more; false")
    if core.may_mount(tmpfs.cap_eff()):  # the private /tmp is a tmpfs of 2 MiB, full: refused, and named
        assert "No space left on device" in failed["output"]["text"], failed
        assert failed["refusal"]["rule"] == "limits.max_tmp_mb", failed
    else:  # counted, not refused
        assert any("limits.max_tmp_mb = 2" in notice for notice in failed["notices"]), failed
