"""Job records that outlive their process, on real processes (S2 jobs 5): a host that crashed (in this
process, and a host process killed -9), a host on a machine that restarted (its boot id changed), a clean close;
then the reopened session's `jobs.list` and `jobs.wait` answer the old jobs with their reason.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from eukhe.core.bound import On, OutputLimits
from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.core.jobends import GroupMark
from eukhe.jobs.bash import BashOptions
from eukhe.procs import BOOT_ID_ENV, group_alive, start_ticks
from eukhe.records.jobs import Detached, Settled
from eukhe.records.journal import EntryRecord
from eukhe.records.sandbox import UNCONFINED
from eukhe.session import Session, SessionSettings
from eukhe.store.journal import read_journal
from tests.real.process_support import end_job_group, job_group

pytestmark = pytest.mark.real

FAST = BashOptions(kill_grace_ms=500, drain_ms=50)
SETTINGS = SessionSettings.bounded_by(On(OutputLimits(200, 1000)), tool_blocking_budget_ms=10_000)
LONG = "seq 1 400; echo $$ > {pidfile}; exec sleep 300"  # past the 200-byte cap: its output goes to an artifact
SEQ_BYTES = len("".join(f"{n}\n" for n in range(1, 401)))


async def poll_until(check: object, timeout_s: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():  # type: ignore[operator]
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for a real event")
        await asyncio.sleep(0.01)


def crash(session: Session) -> None:
    """The host dies without a word: its journal is left as it is, its writer and listeners are gone."""
    session._unsubscribe()
    task = session.writer._task
    assert task is not None
    task.cancel()
    session.journal.close()


async def new_session(tmp_path: Path, session_id: str) -> Session:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return await Session.create(
        work, root=tmp_path / "s", session_id=session_id, settings=SETTINGS, bash_options=FAST, sandbox=UNCONFINED
    )


async def crash_and_end(session: Session, job_id: str, pidfile: Path) -> None:
    """The host dies (`crash`); its job's group is killed, as the daemon does for a dead worker's jobs; this process
    reaps it through the dead session's owner, so nothing of the crash outlives the test."""
    crash(session)
    pid = int(pidfile.read_text())
    os.killpg(pid, signal.SIGKILL)
    live = session.job_table.get(job_id)
    assert live is not None
    await poll_until(lambda: not group_alive(pid) and not live.running)


def end_rows(root: Path, session_id: str) -> list[dict[str, object]]:
    records = [r for c in read_journal(root / session_id / "main.jsonl").commits for r in c.records]
    return [
        r.content
        for r in records
        if isinstance(r, EntryRecord)
        and r.kind == "notice"
        and r.content.get("notice") in ("eukhe.bash", "eukhe.job_end")
    ]


def test_a_session_that_crashed_in_this_process_reopens_with_its_old_jobs_ended_as_worker_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BOOT_ID_ENV, "boot-same")
    pidfile = tmp_path / "job.pid"
    root = tmp_path / "s"

    async def scenario() -> None:
        session = await new_session(tmp_path, "c")
        done = await session.execute_bash_and_wait("echo one")
        assert isinstance(done, Settled)
        detached = await session.execute_bash_and_wait(LONG.format(pidfile=pidfile), budget_ms=0)
        assert isinstance(detached, Detached)
        assert detached.job in session.view_state().of_type(JOB_DOC_TYPE)  # answered once its node is durable
        await poll_until(lambda: pidfile.exists() and pidfile.read_text().strip())
        live = session.job_table.get(detached.job)
        assert live is not None
        await poll_until(lambda: live.kept + live.dropped == SEQ_BYTES)  # its output is in its artifact: then the crash
        await session.writer.idle()
        await crash_and_end(session, detached.job, pidfile)

        reopened = await Session.open("c", root=root, bash_options=FAST)
        rows = {row.id: row for row in reopened.jobs.list()}
        assert list(rows) == [done.job, detached.job]
        assert (rows[done.job].status, rows[done.job].exit_code, rows[done.job].reason) == ("ended", 0, None)
        old = rows[detached.job]
        assert (old.status, old.killed, old.exit_code, old.reason) == ("ended", True, None, "worker_died")
        answer = await reopened.jobs.wait(detached.job, timeout_ms=60_000)
        assert isinstance(answer, Settled)
        assert answer.reason == "worker_died"
        artifact = answer.output.artifact
        assert artifact is not None  # its output so far stays with it: the artifact, every byte counted
        assert answer.output.bytes_kept + answer.output.bytes_dropped == Path(artifact).stat().st_size
        assert Path(artifact).read_bytes().startswith(b"1\n2\n3\n")
        # This life's jobs come after: a new run is listed last, and its own end is this life's.
        again = await reopened.execute_bash_and_wait("echo two")
        assert [row.id for row in reopened.jobs.list()] == [done.job, detached.job, again.job]
        await reopened.close()

    asyncio.run(scenario())


def test_a_clean_close_kills_the_running_jobs_and_their_rows_say_session_closed(tmp_path: Path) -> None:
    root = tmp_path / "s"

    async def scenario() -> None:
        session = await new_session(tmp_path, "k")
        detached = await session.execute_bash_and_wait("sleep 300", budget_ms=0)
        assert isinstance(detached, Detached)
        exited = await session.execute_bash_and_wait("exit 3")
        await session.close()
        (row,) = [r for r in end_rows(root, "k") if r["job"] == detached.job]
        assert (row["killed"], row["reason"]) == (True, "session_closed")
        reopened = await Session.open("k", root=root)
        answer = await reopened.jobs.wait(detached.job)
        assert isinstance(answer, Settled)
        assert (answer.killed, answer.reason) == (True, "session_closed")
        exit_answer = await reopened.jobs.wait(exited.job)
        assert isinstance(exit_answer, Settled)
        assert (exit_answer.exit_code, exit_answer.killed, exit_answer.reason) == (3, False, None)
        await reopened.close()
        assert len(end_rows(root, "k")) == 2  # one row per job: the reopen found nothing left to end

    asyncio.run(scenario())


def test_a_stop_recorded_before_the_host_died_is_the_reason_of_the_jobs_it_had_not_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BOOT_ID_ENV, "boot-same")
    pidfile = tmp_path / "job.pid"
    root = tmp_path / "s"

    async def scenario() -> None:
        session = await new_session(tmp_path, "d")
        detached = await session.execute_bash_and_wait(f"echo $$ > {pidfile}; exec sleep 300", budget_ms=0)
        assert isinstance(detached, Detached)
        await poll_until(lambda: pidfile.exists() and pidfile.read_text().strip())
        await session.begin_stop("daemon_stopped")  # recorded on the job's node; then the host dies before its kills
        await crash_and_end(session, detached.job, pidfile)
        reopened = await Session.open("d", root=root)
        (row,) = reopened.jobs.list()
        assert (row.id, row.killed, row.reason) == (detached.job, True, "daemon_stopped")
        await reopened.close()

    asyncio.run(scenario())


HOST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from eukhe.records.sandbox import UNCONFINED
    from eukhe.session import Session

    async def main() -> None:
        root, work, pidfile = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
        session = await Session.create(work, root=root, session_id="h", sandbox=UNCONFINED)
        answer = await session.execute_bash_and_wait(f"sleep 300 & echo $$ > {pidfile}; wait", budget_ms=0)
        print(answer.job, flush=True)  # a detached answer goes back once the job's node is committed
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(("boots", "reason", "leader"), [
    (("boot-a", "boot-a"), "worker_died", "alive"),
    (("boot-a", "boot-a"), "worker_died", "gone"),
    (("boot-a", "boot-b"), "host_restart", "alive"),
])  # fmt: skip
def test_a_host_killed_9_then_reopened_on_the_same_or_a_restarted_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, boots: tuple[str, str], reason: str, leader: str
) -> None:
    """The reopen records the job ended with its host, and ends what the dead host left of its process group (no
    supervisor reaps it here): by its leader, or (the leader killed meanwhile) by the mark its member carries. On
    another boot the group is not the job's (here the test's stand-in for one): it is left alone."""
    root, work, pidfile = tmp_path / "s", tmp_path / "work", tmp_path / "job.pid"
    boot_then, boot_now = boots
    work.mkdir()
    env = {**os.environ, BOOT_ID_ENV: boot_then}
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(root), str(work), str(pidfile)], stdout=subprocess.PIPE, text=True, env=env
    )
    left: list[GroupMark | None] = []  # the job's group, once known
    try:
        assert host.stdout is not None
        job = host.stdout.readline().strip()
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.01)  # bounded wait for the job to run (its pid: the group to end afterwards)
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=10)
        group = int(pidfile.read_text())
        left.append(job_group(group))
        assert group_alive(group)  # the job's group outlived its host
        if leader == "gone":
            os.kill(group, signal.SIGKILL)  # the leader ends; its `sleep` lives on in the group
            deadline = time.monotonic() + 10
            while start_ticks(group) is not None and time.monotonic() < deadline:
                time.sleep(0.01)  # bounded wait for the kill to land
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()
    try:
        monkeypatch.setenv(BOOT_ID_ENV, boot_now)

        async def reopen() -> None:
            session = await Session.open("h", root=root)
            (row,) = session.jobs.list()
            assert (row.id, row.status, row.killed, row.reason) == (job, "ended", True, reason)
            answer = await session.jobs.wait(job)
            assert isinstance(answer, Settled)
            assert answer.reason == reason
            assert answer.output.bytes_kept + answer.output.bytes_dropped == 0  # no artifact: the journal knew none
            await session.close()

        asyncio.run(reopen())
        group = int(pidfile.read_text())
        deadline = time.monotonic() + 10
        while group_alive(group) and reason == "worker_died" and time.monotonic() < deadline:
            time.sleep(0.01)  # bounded wait for the reopen's SIGKILL to land
        assert group_alive(group) is (reason != "worker_died")
    finally:
        if not left and pidfile.exists() and pidfile.read_text().strip():  # it failed before the group was known
            left.append(job_group(int(pidfile.read_text())))
        for mark in left:  # the dead host's job: not ours to leave behind
            end_job_group(mark)
