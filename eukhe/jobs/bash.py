"""User bash (spec S2 "Jobs" 3-4): every run is a job in its own session and process group.

`bash -c COMMAND` runs with `start_new_session=True` (its own session and process group), in the given working
directory, stdin from /dev/null, stdout and stderr merged into one pipe that streams into the job (the session's
Truncation bounds it; the full output spills to an artifact).

A kill goes to the whole group: SIGTERM, then SIGKILL after a grace if any member is still alive. It works when the
command closed stdout and stderr, because it never relies on the pipe. The owner reports the end only once the leader
has exited and no live member of the group remains, so a cancel that waits for the end finds no survivor.

The group ends with the job. When the leader exits, the pipe may drain for a moment (`drain_s`); then any process
left in the group gets SIGTERM, and SIGKILL after the grace; then the pipe is closed and the job ends with the
leader's exit code. So a command that leaves a background child holding its stdout returns at once, and the child is
gone. Once the group is gone the rest of the pipe is read to its EOF (at most 1 s more: only a process that left the
group with its own `setsid` can hold it open; it is not ours to kill, and we stop reading its output).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eukhe.core import job as core
from eukhe.core.limits import Truncation
from eukhe.errors import EukheError
from eukhe.jobs.job import Job, JobSpec
from eukhe.jobs.table import JobTable
from eukhe.jobs.wait import wait_until
from eukhe.output import BoundedResult

_GIVE_UP_S = 10.0  # past the kill grace: a member that survives SIGKILL this long (stuck in the kernel) is given up
_EOF_AFTER_GROUP_S = 1.0  # once the group is gone the pipe's EOF is due; only a process that left the group delays it


class BashStartError(EukheError):
    """bash could not be started (a missing working directory, no bash)."""

    code = "bash_start_failed"

    def __init__(self, command: str, cwd: Path, reason: str) -> None:
        super().__init__(f"cannot start bash in {cwd}: {reason}")
        self.command = command
        self.cwd = cwd
        self.reason = reason


@dataclass(frozen=True, slots=True)
class BashOptions:
    """Timings of a bash job's end."""

    kill_grace_s: float = 2.0  # after SIGTERM to the group, SIGKILL to the group
    drain_s: float = 0.1  # after the leader exits, how long the pipe may stay open before the group is ended


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in process group `pgid`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return bool(group_members(pgid))


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of group `pgid`, read from /proc."""
    members: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                raw = stat.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
            members.append(int(name))
    return members


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


class _Pipe(asyncio.SubprocessProtocol):
    """The merged stdout+stderr pipe and the leader's exit, as futures; output goes to the job once it exists."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.job: Job | None = None
        self.early: list[bytes] = []
        self.eof: asyncio.Future[None] = loop.create_future()
        self.exited: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        if self.job is None:
            self.early.append(chunk)
        else:
            self.job.write(chunk)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.eof.done():
            self.eof.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def attach(self, job: Job) -> None:
        self.job = job
        for chunk in self.early:
            job.write(chunk)
        self.early.clear()


class BashRun:
    """The owner of one bash job: kills its group, watches its leader, reports its end."""

    def __init__(self, transport: asyncio.SubprocessTransport, pipe: _Pipe, options: BashOptions) -> None:
        self.transport = transport
        self.pipe = pipe
        self.options = options
        pid = transport.get_pid()
        assert pid is not None
        self.pgid = pid  # start_new_session: the leader's pid is the group's id
        self.job: Job | None = None
        self.task: asyncio.Task[None] | None = None
        self._kill_timer: asyncio.TimerHandle | None = None
        self._terminating = False

    def kill(self, job: Job) -> None:
        """SIGTERM to the whole group now, SIGKILL to it after the grace; the end comes when the group is gone."""
        self._terminate()

    def _terminate(self) -> None:
        if self._terminating:
            return
        self._terminating = True
        _signal_group(self.pgid, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        self._kill_timer = loop.call_later(self.options.kill_grace_s, _signal_group, self.pgid, signal.SIGKILL)

    async def supervise(self, job: Job) -> None:
        """Wait for the leader, drain, end the group, close the pipe, report the end."""
        done = False
        try:
            await self.pipe.exited
            code = self.transport.get_returncode()
            await _within(self.pipe.eof, self.options.drain_s)
            if group_alive(self.pgid):
                self._terminate()
                await self._until_group_gone()
            await _within(self.pipe.eof, max(self.options.drain_s, _EOF_AFTER_GROUP_S))
            done = True
        finally:
            if not done:  # cancelled (the loop is closing): leave no process behind
                _signal_group(self.pgid, signal.SIGKILL)
            if self._kill_timer is not None:
                self._kill_timer.cancel()
            self.transport.close()
        if job.kill_requested:
            job.finish(core.Killed())
        else:
            job.finish(core.exited(code if code is not None else 0))

    async def _until_group_gone(self) -> None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.options.kill_grace_s + _GIVE_UP_S
        pause = 0.002
        while group_alive(self.pgid) and loop.time() < give_up:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)


async def _within(future: asyncio.Future[None], seconds: float) -> None:
    """Wait for `future` at most `seconds` (never cancels it)."""
    if not future.done():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(future), seconds)


async def start_bash(
    command: str,
    cwd: Path,
    *,
    truncation: Truncation,
    artifact_dir: Path | None,
    table: JobTable,
    options: BashOptions | None = None,
    env: Mapping[str, str] | None = None,
) -> Job:
    """Start `bash -c command` in `cwd` as a job of `table` (kind "bash", title the command)."""
    opts = options if options is not None else BashOptions()
    loop = asyncio.get_running_loop()
    try:
        transport, pipe = await loop.subprocess_exec(
            _Pipe,
            "bash",
            "-c",
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    except OSError as error:
        raise BashStartError(command, cwd, error.strerror or str(error)) from error
    run = BashRun(transport, pipe, opts)
    try:
        job = table.start(JobSpec("bash", command, truncation, artifact_dir), run)
    except BaseException:  # a closed table (JobTableClosedError) or a failing listener: leave no process behind
        _signal_group(run.pgid, signal.SIGKILL)
        await _within(pipe.exited, _GIVE_UP_S)  # reaped before the transport goes
        transport.close()
        raise
    run.job = job
    pipe.attach(job)
    run.task = asyncio.create_task(run.supervise(job), name=f"bash {job.id}")
    _RUNS.add(run.task)
    run.task.add_done_callback(_RUNS.discard)
    return job


_RUNS: set[asyncio.Task[None]] = set()  # strong references: a supervising task lives until its job ends


@dataclass(frozen=True, slots=True)
class BashSettled:
    """The run ended within the budget."""

    job_id: str
    exit_code: int | None  # None when killed
    killed: bool
    output: BoundedResult

    def as_json(self) -> dict[str, Any]:
        return {"job": self.job_id, "exitCode": self.exit_code, "killed": self.killed, "output": self.output.as_json()}


@dataclass(frozen=True, slots=True)
class BashDetached:
    """The budget passed: the run goes on as a job; here is its output so far."""

    job_id: str
    budget_ms: int
    output: BoundedResult

    def as_json(self) -> dict[str, Any]:
        return {"detached": {"job": self.job_id, "budgetMs": self.budget_ms}, "output": self.output.as_json()}


def bash_outcome(job: Job, verdict: core.Settled | core.Detached, budget_ms: int) -> BashSettled | BashDetached:
    """The answer of a blocking bash call from its wait's verdict."""
    if isinstance(verdict, core.Settled):
        end = verdict.end
        code = end.code if isinstance(end, core.Exited) else None
        return BashSettled(job.id, code, isinstance(end, core.Killed), job.result())
    return BashDetached(job.id, budget_ms, job.snapshot())


async def bash_and_wait(
    command: str,
    cwd: Path,
    *,
    truncation: Truncation,
    artifact_dir: Path | None,
    table: JobTable,
    budget_ms: int,
    options: BashOptions | None = None,
    env: Mapping[str, str] | None = None,
) -> BashSettled | BashDetached:
    """Start a bash job, wait at most `budget_ms`: settled with its end, or detached with its output so far."""
    deadline_ms = table.clock.now_ms() + max(0, budget_ms)  # the budget runs from the call, spawn included
    job = await start_bash(
        command, cwd, truncation=truncation, artifact_dir=artifact_dir, table=table, options=options, env=env
    )
    verdict = await wait_until(job, deadline_ms)
    return bash_outcome(job, verdict, budget_ms)
