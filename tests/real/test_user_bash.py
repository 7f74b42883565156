"""User bash on real processes (spec S2 "Jobs" 1-4, 6): every run a job in its own process group; kills reach the
whole group; a background child holding the pipe does not hang a call; counts are exact for large outputs.

No test sleeps on wall time: each polls a real fact (the job's output, its end, /proc) with a bounded deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from eukhe.core import job as core
from eukhe.core.bound import DEFAULT_TRUNCATION, Keep, Off, On, OutputLimits, Truncation
from eukhe.core.job import Exited, Killed
from eukhe.jobs import Job, JobTable, JobTableClosedError, wait_until
from eukhe.jobs.bash import (
    BashOptions,
    BashRun,
    BashStartError,
    bash_and_wait,
    start_bash,
)
from eukhe.procs import group_members, has_controlling_terminal
from eukhe.records.jobs import Detached, Settled

pytestmark = pytest.mark.real

T = TypeVar("T")
FAST = BashOptions(kill_grace_ms=300, drain_ms=50)


def run(body: Callable[[JobTable], Awaitable[T]]) -> T:
    """Run a test body on a fresh table; every job it leaves running is killed and awaited before the loop closes."""

    async def main() -> T:
        table = JobTable()
        try:
            return await body(table)
        finally:
            rewound = await table.quit(table.clock.now_ms() + 10_000)
            assert not rewound.stopping, "a job outlived the quit"

    return asyncio.run(main())


async def until(fact: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Poll a real fact until it holds, at most `timeout_s`."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout_s
    while not fact():
        assert loop.time() < give_up, "the fact never came true"
        await asyncio.sleep(0.01)


def pgid_of(job: Job) -> int:
    owner = job.owner
    assert isinstance(owner, BashRun)
    return owner.pgid


async def bash(table: JobTable, command: str, cwd: Path, truncation: Truncation = DEFAULT_TRUNCATION) -> Job:
    return await start_bash(command, cwd, truncation=truncation, artifact_dir=None, table=table, options=FAST)


def test_a_job_whose_grandchildren_ignore_sigterm_is_fully_gone_after_cancel(tmp_path: Path) -> None:
    command = (
        "trap '' TERM; "
        "(trap '' TERM; sleep 1000) & "
        "(trap '' TERM; sleep 1000) & "
        "(trap '' TERM; exec >&- 2>&-; sleep 1000) & "
        "echo ready; wait"
    )

    async def body(table: JobTable) -> None:
        job = await bash(table, command, tmp_path)
        await until(lambda: b"ready" in job.snapshot().text)
        pgid = pgid_of(job)
        await until(lambda: len(group_members(pgid)) >= 4)  # bash, two subshells' sleeps, the silent one...
        assert os.getpgid(pgid) == pgid
        # Own session with a terminal (see the pty test); here, without one: the host's.
        assert os.getsid(pgid) == (pgid if has_controlling_terminal() else os.getsid(0))
        job.kill()
        verdict = await wait_until(job, table.clock.now_ms() + 10_000)
        assert verdict == core.EndedInTime(Killed())
        assert group_members(pgid) == []  # no process of its group survives

    run(body)


JOB_SESSION_PROBE = """
import asyncio, os
from pathlib import Path
from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.jobs import JobTable, wait_until
from eukhe.jobs.bash import start_bash
from eukhe.procs import has_controlling_terminal

async def main():
    table = JobTable()
    job = await start_bash("sleep 30", Path.cwd(), truncation=DEFAULT_TRUNCATION, artifact_dir=None, table=table)
    pgid = job.owner.pgid
    print("facts", has_controlling_terminal(), os.getpgid(pgid) == pgid, os.getsid(pgid) == pgid,
          os.getsid(pgid) == os.getsid(0), flush=True)
    await table.quit(table.clock.now_ms() + 10_000)

asyncio.run(main())
"""


def _probe_job_session(with_terminal: bool) -> str:
    """Run JOB_SESSION_PROBE in a fresh session, on a new pseudo-terminal (its controlling terminal) or on none."""
    if not with_terminal:
        command = [sys.executable, "-c", JOB_SESSION_PROBE]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, start_new_session=True, check=False)
        return done.stdout
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        os.execv(sys.executable, [sys.executable, "-c", JOB_SESSION_PROBE])
    output = b""
    with contextlib.suppress(OSError):  # EIO once the child closed the pty
        while chunk := os.read(fd, 4096):
            output += chunk
    os.close(fd)
    os.waitpid(pid, 0)
    return output.decode(errors="replace")


def test_a_job_is_in_its_own_session_with_a_terminal_and_in_the_hosts_without() -> None:
    """With a controlling terminal a job gets its own session (it can never read the terminal); without one (a
    daemon worker) it stays in the host's session, in its own process group either way."""
    assert "facts True True True False" in _probe_job_session(with_terminal=True)
    assert "facts False True False True" in _probe_job_session(with_terminal=False)


def test_a_command_that_closes_stdout_and_stderr_and_keeps_running_is_still_killable(tmp_path: Path) -> None:
    """The sleeping process is a child, not the group's leader: bash stays the leader in `wait` (a last command
    alone would be exec'd, and a kill of the leader only would then pass). The kill must reach the whole group."""

    async def body(table: JobTable) -> None:
        job = await bash(table, "echo bye; exec >&- 2>&-; sleep 1000 & wait", tmp_path)
        await until(lambda: b"bye" in job.snapshot().text)
        pgid = pgid_of(job)
        try:
            await until(lambda: any(_comm(pid) == "sleep" for pid in group_members(pgid)))
            assert _comm(pgid) == "bash"  # the leader is bash, the sleep is another member
            (sleeper,) = [pid for pid in group_members(pgid) if _comm(pid) == "sleep"]
            assert sleeper != pgid
            job.kill()
            assert await wait_until(job, table.clock.now_ms() + 10_000) == core.EndedInTime(Killed())
            assert group_members(pgid) == []  # no process of the group survives, the sleeping child included
            assert job.result().text == b"bye\n"
        finally:
            for pid in group_members(pgid):  # a failed kill leaves nothing behind (the suite leaves no process)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    run(body)


def test_a_command_that_exits_while_a_background_child_holds_stdout_returns_promptly(tmp_path: Path) -> None:
    async def body(table: JobTable) -> None:
        answer = await bash_and_wait(
            "sleep 1000 & echo done",
            tmp_path,
            truncation=DEFAULT_TRUNCATION,
            artifact_dir=None,
            table=table,
            budget_ms=8_000,
            options=FAST,
        )
        assert isinstance(answer, Settled), answer  # a hang would detach at the budget
        assert (answer.exit_code, answer.killed, answer.output.text) == (0, False, "done\n")
        job = table.get(answer.job)
        left = table.get(answer.left_running or "")
        assert job is not None and left is not None and left.running  # the sleep goes on as a job of its own
        left.kill()
        await wait_until(left, table.clock.now_ms() + 10_000)
        assert left.end == Killed()
        assert group_members(pgid_of(job)) == []  # the kill ended the group: the sleep is gone

    run(body)


def test_large_output_is_counted_exactly_under_the_cap_and_spills_to_the_artifact(tmp_path: Path) -> None:
    size = 30_000_000

    async def body(table: JobTable) -> None:
        answer = await bash_and_wait(
            f"yes abcdefghij | head -c {size}",
            tmp_path,
            truncation=DEFAULT_TRUNCATION,
            artifact_dir=tmp_path / "artifacts",
            table=table,
            budget_ms=60_000,
        )
        assert isinstance(answer, Settled)
        job = table.get(answer.job)
        assert job is not None
        assert (job.kept, job.dropped) == (51_200, size - 51_200)
        assert answer.output.bytes_kept + answer.output.bytes_dropped == size
        assert answer.output.bytes_kept <= 51_200
        assert answer.output.artifact is not None
        assert Path(answer.output.artifact).stat().st_size == size
        assert Path(answer.output.artifact).stat().st_mode & 0o777 == 0o600

    run(body)


def test_opt_out_keeps_every_byte(tmp_path: Path) -> None:
    async def body(table: JobTable) -> None:
        answer = await bash_and_wait(
            "head -c 3000000 /dev/zero | tr '\\0' 'x'",
            tmp_path,
            truncation=Off(),
            artifact_dir=tmp_path,
            table=table,
            budget_ms=30_000,
        )
        assert isinstance(answer, Settled)
        assert answer.output.text == "x" * 3_000_000
        assert (answer.output.bytes_kept, answer.output.bytes_dropped, answer.output.artifact) == (3_000_000, 0, None)
        job = table.get(answer.job)
        assert job is not None
        assert (job.kept, job.dropped) == (3_000_000, 0)

    run(body)


def test_cap_and_one_end(tmp_path: Path) -> None:
    """durable::jobs::tests: a capped job keeps at most the cap and ends once; later ends and output are ignored."""
    ends: list[tuple[str, object]] = []

    class Listener:
        def job_started(self, job: Job) -> None:
            ends.append((job.id, "start"))

        def job_ended(self, job: Job, end: object) -> None:
            ends.append((job.id, end))

    async def body(table: JobTable) -> None:
        table.subscribe(Listener())
        truncation = On(OutputLimits(10, 1000, Keep.HEAD))
        job = await bash(table, "printf 0123456789abcdef; exit 7", tmp_path, truncation)
        assert await wait_until(job, table.clock.now_ms() + 10_000) == core.EndedInTime(Exited(7))
        assert (job.kept, job.dropped) == (10, 6)
        assert job.finish(Killed()) is False
        job.write(b"late")
        job.kill()
        assert (job.kept, job.dropped, job.end) == (10, 6, Exited(7))
        assert ends == [(job.id, "start"), (job.id, Exited(7))]

    run(body)


def test_exit_codes_and_a_signal_nobody_sent(tmp_path: Path) -> None:
    async def body(table: JobTable) -> None:
        plain = await bash(table, "exit 3", tmp_path)
        signalled = await bash(table, "kill -KILL $$", tmp_path)
        assert await wait_until(plain, table.clock.now_ms() + 10_000) == core.EndedInTime(Exited(3))
        assert await wait_until(signalled, table.clock.now_ms() + 10_000) == core.EndedInTime(Exited(137))

    run(body)


def test_runs_in_its_working_dir_and_refuses_a_missing_one(tmp_path: Path) -> None:
    async def body(table: JobTable) -> None:
        job = await bash(table, "pwd; echo err >&2", tmp_path)
        await wait_until(job, table.clock.now_ms() + 10_000)
        assert job.result().text == f"{tmp_path}\nerr\n".encode()
        with pytest.raises(BashStartError) as refused:
            await bash(table, "true", tmp_path / "gone")
        assert refused.value.code == "bash_start_failed"
        assert len(table.jobs()) == 1  # a run that never started is no job

    run(body)


def test_rewind_kills_the_jobs_started_after_the_target(tmp_path: Path) -> None:
    """durable::jobs::tests rewind kill: the jobs started after the target stop, the others go on."""

    async def body(table: JobTable) -> None:
        table.observe("e1")
        early = await bash(table, "sleep 1000", tmp_path)
        table.observe("e2")
        late = await bash(table, "trap '' TERM; sleep 1000 & wait", tmp_path)
        rewound = await table.rewind("e2", table.clock.now_ms() + 10_000)
        assert rewound.stopped == (late,)
        assert rewound.stopping == ()
        assert late.end == Killed()
        assert early.running
        rewound = await table.rewind("e1", table.clock.now_ms() + 10_000)
        assert rewound.stopped == (early,)
        assert group_members(pgid_of(early)) == []
        assert group_members(pgid_of(late)) == []

    run(body)


def test_a_rewind_names_the_jobs_still_stopping_at_its_deadline(tmp_path: Path) -> None:
    async def body(table: JobTable) -> None:
        slow = await start_bash(
            "trap '' TERM; echo armed; sleep 1000 & wait",
            tmp_path,
            truncation=DEFAULT_TRUNCATION,
            artifact_dir=None,
            table=table,
            options=BashOptions(kill_grace_ms=1000),
        )
        await until(lambda: b"armed" in slow.snapshot().text)
        rewound = await table.rewind(None, table.clock.now_ms() + 50)  # SIGKILL comes only after the 1 s grace
        assert rewound.stopped == ()
        assert rewound.stopping == (slow,)
        assert await wait_until(slow, table.clock.now_ms() + 10_000) == core.EndedInTime(Killed())

    run(body)


def test_wait_detaches_at_the_budget_and_a_later_wait_settles(tmp_path: Path) -> None:
    """durable::jobs::tests wait: past the budget the call detaches with the output so far; the job goes on."""

    async def body(table: JobTable) -> None:
        answer = await bash_and_wait(
            "echo started; sleep 0.3; echo finished",
            tmp_path,
            truncation=DEFAULT_TRUNCATION,
            artifact_dir=None,
            table=table,
            budget_ms=0,
        )
        assert isinstance(answer, Detached)
        assert (answer.job, answer.budget_ms) == (answer.job, 0)
        job = table.get(answer.job)
        assert job is not None
        assert job.running
        assert await wait_until(job, table.clock.now_ms() + 10_000) == core.EndedInTime(Exited(0))
        assert job.result().text == b"started\nfinished\n"
        passed = await wait_until(job, table.clock.now_ms())  # a passed deadline detaches even when the end is ready
        assert isinstance(passed, core.DeadlinePassed)

    run(body)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_a_process_that_left_the_group_does_not_hold_the_job_open(tmp_path: Path) -> None:
    """A `setsid` child is not in the job's group: the job still ends; we stop reading the pipe it holds."""
    escaped: list[int] = []

    async def body(table: JobTable) -> None:
        answer = await bash_and_wait(
            "setsid sleep 1000 & echo $!",
            tmp_path,
            truncation=DEFAULT_TRUNCATION,
            artifact_dir=None,
            table=table,
            budget_ms=8_000,
            options=FAST,
        )
        assert isinstance(answer, Settled), answer
        escaped.append(int(answer.output.text))
        assert answer.exit_code == 0
        assert _comm(escaped[0]) == "sleep"  # not ours: left running

    try:
        run(body)
    finally:
        for pid in escaped:
            os.kill(pid, signal.SIGKILL)


def test_after_the_host_quits_no_bash_starts_and_none_is_left_behind(tmp_path: Path) -> None:
    marker = f"eukhe-quit-marker-{os.getpid()}"

    def marked() -> list[int]:
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                except OSError:
                    continue
                if marker.encode() in cmdline and _all_live([int(name)]):
                    found.append(int(name))
        return found

    async def body(table: JobTable) -> None:
        await table.quit(table.clock.now_ms())
        with pytest.raises(JobTableClosedError):
            await bash(table, f"exec -a {marker} sleep 1000", tmp_path)
        assert table.jobs() == ()
        await until(lambda: marked() == [])  # the spawned run was killed at once

    run(body)


def _all_live(pids: list[int]) -> list[int]:
    """The pids that are live (not zombies)."""
    live = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
            live.append(pid)
    return live
