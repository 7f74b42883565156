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
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from eukhe.clock import Cancellable, Clock, poll_until, wait_within
from eukhe.core import job as core
from eukhe.core.limits import Truncation
from eukhe.errors import EukheError
from eukhe.jobs.job import Job, JobSpec
from eukhe.jobs.table import JobTable
from eukhe.jobs.wait import settle_or_detach
from eukhe.procs import group_alive, kill_group, signal_group
from eukhe.records.jobs import Detached, Settled

GIVE_UP_MS = 10_000  # past the kill grace: a member that survives SIGKILL this long (stuck in the kernel) is given up
EOF_AFTER_GROUP_MS = 1_000  # once the group is gone the pipe's EOF is due; only a process that left the group delays it


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
    """Timings of a bash job's end, on its table's clock."""

    kill_grace_ms: int = 2_000  # after SIGTERM to the group, SIGKILL to the group
    drain_ms: int = 100  # after the leader exits, how long the pipe may stay open before the group is ended


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
    """The owner of one bash job: kills its group, watches its leader, reports its end (every wait on `clock`)."""

    def __init__(self, transport: asyncio.SubprocessTransport, pipe: _Pipe, options: BashOptions, clock: Clock) -> None:
        self.transport = transport
        self.pipe = pipe
        self.options = options
        self.clock = clock
        pid = transport.get_pid()
        assert pid is not None
        self.pgid = pid  # start_new_session: the leader's pid is the group's id
        self.job: Job | None = None
        self.task: asyncio.Task[None] | None = None
        self._kill_timer: Cancellable | None = None
        self._terminating = False

    def kill(self, job: Job) -> None:
        """SIGTERM to the whole group now, SIGKILL to it after the grace; the end comes when the group is gone."""
        self._terminate()

    def _terminate(self) -> None:
        if self._terminating:
            return
        self._terminating = True
        signal_group(self.pgid, signal.SIGTERM)
        deadline = self.clock.now_ms() + self.options.kill_grace_ms
        self._kill_timer = self.clock.call_at(deadline, lambda: kill_group(self.pgid))

    async def supervise(self, job: Job) -> None:
        """Wait for the leader, drain, end the group, close the pipe, report the end."""
        done = False
        clock, options = self.clock, self.options
        try:
            await self.pipe.exited
            code = self.transport.get_returncode()
            await wait_within(clock, self.pipe.eof, options.drain_ms)
            if group_alive(self.pgid):
                self._terminate()
                give_up = clock.now_ms() + options.kill_grace_ms + GIVE_UP_MS
                await poll_until(clock, lambda: not group_alive(self.pgid), give_up)
            await wait_within(clock, self.pipe.eof, max(options.drain_ms, EOF_AFTER_GROUP_MS))
            done = True
        finally:
            if not done:  # cancelled (the loop is closing): leave no process behind
                kill_group(self.pgid)
            if self._kill_timer is not None:
                self._kill_timer.cancel()
            self.transport.close()
        if job.kill_requested:
            job.finish(core.Killed())
        else:
            job.finish(core.exited(code if code is not None else 0))


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
    run = BashRun(transport, pipe, opts, table.clock)
    try:
        job = table.start(JobSpec("bash", command, truncation, artifact_dir), run)
    except BaseException:  # a closed table (JobTableClosedError) or a failing listener: leave no process behind
        kill_group(run.pgid)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(pipe.exited), GIVE_UP_MS / 1000)  # reaped before the transport goes
        transport.close()
        raise
    run.job = job
    pipe.attach(job)
    run.task = asyncio.create_task(run.supervise(job), name=f"bash {job.id}")
    _RUNS.add(run.task)
    run.task.add_done_callback(_RUNS.discard)
    return job


_RUNS: set[asyncio.Task[None]] = set()  # strong references: a supervising task lives until its job ends


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
    on_start: Callable[[Job], None] | None = None,
) -> Settled | Detached:
    """Start a bash job, wait at most `budget_ms`: settled with its end, or detached with its output so far.

    Cancelling the call (Ctrl-C at the CLI) kills the job through its owner, waits for its end at most the budget,
    then re-raises the cancellation (see `settle_or_detach`)."""
    deadline_ms = table.clock.now_ms() + max(0, budget_ms)  # the budget runs from the call, spawn included
    job = await start_bash(
        command, cwd, truncation=truncation, artifact_dir=artifact_dir, table=table, options=options, env=env
    )
    if on_start is not None:
        on_start(job)
    return await settle_or_detach(job, deadline_ms, budget_ms)
