"""Job records that outlive their process, through the daemon and the CLI (S2 jobs 5).

Each test starts a long detached job, ends its life one way, then asks `eukhe jobs list` and `eukhe jobs wait` about
it from a later life: a worker killed -9 (`worker_died`), the supervisor killed -9 (its workers see their stdin close
and stop cleanly: `daemon_stopped`), a clean `daemon stop` (`daemon_stopped`), a `session close --force`
(`session_closed`), and the whole daemon killed -9 on a machine whose boot id then changed (`host_restart`, the boot
id given by EUKHE_BOOT_ID). A job of an earlier life answers `jobs wait` at once, settled, with its reason, and
the output it wrote before its host died (read back from its spill file).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from eukhe.procs import BOOT_ID_ENV, children_of, group_alive
from tests.real.conftest import DaemonEnv
from tests.real.test_daemon_reliability import alive, eventually, start_long_job

pytestmark = pytest.mark.real


def assert_recorded(world: DaemonEnv, session: str, job: str, reason: str, kind: str = "bash") -> dict[str, Any]:
    """The old job is listed, ended and killed with `reason`, and `jobs wait` answers its end at once."""
    rows = {row["id"]: row for row in world.json("jobs", "list", "--session", session)["jobs"]}
    row = rows[job]
    assert (row["status"], row["killed"], row["exit_code"], row["reason"], row["kind"]) == (
        "ended",
        True,
        None,
        reason,
        kind,
    )
    answer = world.json("jobs", "wait", job, "--session", session, "--timeout-ms", "600000")
    assert (answer["status"], answer["job"], answer["killed"], answer["reason"]) == ("settled", job, True, reason)
    cancelled = world.json("jobs", "cancel", job, "--session", session)
    assert (cancelled["status"], cancelled["reason"]) == ("settled", reason)
    text = world.cli("jobs", "list", "--session", session).stdout
    assert f"killed ({reason})" in text
    return answer


def test_a_job_of_a_worker_killed_9_answers_jobs_list_and_wait_with_worker_died(
    world: DaemonEnv, tmp_path: Path
) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    job, worker_pid, groups = start_long_job(world, session)
    os.kill(worker_pid, signal.SIGKILL)
    eventually(lambda: not any(group_alive(g) for g in groups), "the dead worker's job groups to end")
    assert_recorded(world, session, job, "worker_died")
    # The session goes on: a new job of this life is listed after the old one.
    again = world.json("bash", "--session", session, "--", "echo again")
    assert [row["id"] for row in world.json("jobs", "list", "--session", session)["jobs"]][-2:] == [job, again["job"]]


def test_a_job_of_a_supervisor_killed_9_answers_with_daemon_stopped(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    job, worker_pid, groups = start_long_job(world, session)
    os.kill(world.json("daemon", "status")["pid"], signal.SIGKILL)
    # The orphaned worker sees its stdin close: the daemon stopped. It records that, then ends its jobs and exits.
    eventually(lambda: not alive(worker_pid), "the orphaned worker to exit")
    eventually(lambda: not any(group_alive(g) for g in groups), "the job's group to end")
    assert_recorded(world, session, job, "daemon_stopped")


def test_a_job_ended_by_a_clean_daemon_stop_answers_with_daemon_stopped(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    job, _worker_pid, groups = start_long_job(world, session)
    assert world.cli("daemon", "stop").returncode == 0
    eventually(lambda: world.daemon_pid() is None and not world.processes(), "the daemon and its workers to end")
    assert not any(group_alive(g) for g in groups)
    assert_recorded(world, session, job, "daemon_stopped")


def test_a_job_ended_by_a_forced_session_close_answers_with_session_closed(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    job, worker_pid, groups = start_long_job(world, session)
    assert world.json("session", "close", session, "--force")["was_open"] is True
    eventually(lambda: not alive(worker_pid), "the session's worker to exit")
    assert not any(group_alive(g) for g in groups)
    assert_recorded(world, session, job, "session_closed")


def test_a_job_of_a_daemon_that_died_with_its_machine_answers_with_host_restart(
    world: DaemonEnv, tmp_path: Path
) -> None:
    world.env[BOOT_ID_ENV] = "boot-before"
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    job, worker_pid, groups = start_long_job(world, session)
    supervisor = world.json("daemon", "status")["pid"]
    # The machine stops at once: nothing of the daemon gets a word in (the worker is frozen before its stdin closes).
    os.kill(worker_pid, signal.SIGSTOP)
    os.kill(supervisor, signal.SIGKILL)
    os.kill(worker_pid, signal.SIGKILL)
    for group in groups:
        os.killpg(group, signal.SIGKILL)  # a restart ends every process; here, only this test's
    eventually(lambda: not alive(worker_pid) and not alive(supervisor), "the daemon to be gone")
    world.env[BOOT_ID_ENV] = "boot-after"
    assert_recorded(world, session, job, "host_restart")


def test_a_cell_job_of_a_worker_killed_9_answers_with_worker_died(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    detached = world.json("ipython", "--session", session, "--budget-ms", "0", "-c", "import time; time.sleep(300)")
    assert detached["status"] == "detached"
    job = detached["job"]
    (worker,) = [w for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    os.kill(worker["pid"], signal.SIGKILL)
    answer = assert_recorded(world, session, job, "worker_died", kind="cell")
    assert answer["outcome"] == "killed"


def test_a_job_killed_with_its_worker_keeps_what_it_wrote(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    detached = world.json("bash", "--session", session, "--budget-ms", "0", "--", "echo started; sleep 300")
    assert detached["status"] == "detached"
    job = detached["job"]

    def live_row() -> dict[str, Any] | None:
        rows = {row["id"]: row for row in world.json("jobs", "list", "--session", session)["jobs"]}
        row = rows.get(job)
        return row if row is not None and row["bytes_kept"] == 8 else None

    eventually(live_row, "the worker to read the job's line")
    eventually(lambda: job in world.json("session", "show", session)["job_nodes"], "the job node to be committed")
    (worker,) = [w for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    worker_group = os.getpgid(worker["pid"])
    groups = eventually(
        lambda: sorted({g for _, g in children_of(worker["pid"]) if g != worker_group}), "the job's process group"
    )
    os.kill(worker["pid"], signal.SIGKILL)
    eventually(lambda: not any(group_alive(g) for g in groups), "the dead worker's job group to end")
    answer = assert_recorded(world, session, job, "worker_died")
    (row,) = [row for row in world.json("jobs", "list", "--session", session)["jobs"] if row["id"] == job]
    again = world.json("jobs", "wait", job, "--session", session)["output"]
    for window in (answer["output"], again, row):  # every byte and line `echo started` wrote
        assert window["bytes_kept"] + window["bytes_dropped"] == 8
        assert window["lines_kept"] + window["lines_dropped"] == 1
    assert "started" in answer["output"]["text"] and "started" in again["text"]


def test_a_cell_job_killed_with_its_worker_keeps_what_it_wrote(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path), "--sandbox", "off")["id"]
    code = "import time\nprint('before', flush=True)\ntime.sleep(1)\nprint('started', flush=True)\ntime.sleep(300)"
    detached = world.json("ipython", "--session", session, "--budget-ms", "500", "-c", code)
    assert detached["status"] == "detached"
    job = detached["job"]

    def read_all() -> bool:  # what it wrote before it detached, then after
        rows = {row["id"]: row for row in world.json("jobs", "list", "--session", session)["jobs"]}
        return job in rows and rows[job]["bytes_kept"] == 15

    eventually(read_all, "the worker to read the cell's two lines")
    (worker,) = [w for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    os.kill(worker["pid"], signal.SIGKILL)
    answer = assert_recorded(world, session, job, "worker_died", kind="cell")
    output = answer["output"]
    assert output["text"] == "before\nstarted\n"
    assert (output["bytes_kept"] + output["bytes_dropped"], output["lines_kept"] + output["lines_dropped"]) == (15, 2)
