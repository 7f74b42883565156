"""User bash (spec S2 "Jobs" 3-4): every run is a job in its own process group.

`bash -c COMMAND` runs in its own process group (and its own session when the host has a controlling terminal, so
that a job never reads it), in the given working directory, stdin from /dev/null, stdout and stderr merged into one
pipe that streams into the job (the session's Truncation bounds it; the full output spills to an artifact). A tty
job (`tty`) runs instead on a pseudo-terminal, as a session of its own whose controlling terminal it is: its output
is read from the master side in the same way, and `job.terminal` writes to it (docs/jobs.md, "Interactive jobs").

Many busy jobs at once (bench/many_jobs.py): the host reads each pipe itself, taking what it holds in one
read (FIONREAD: the read allocates exactly what it returns, so no fresh pages are mapped and faulted per read), from
pipes widened to PIPE_BYTES (fewer reads and loop wake-ups); without a terminal a job stays in the host's session,
since Linux's autogroup scheduler gives each session an equal share of the CPU: 50 jobs in 50 sessions left the one
host reading them all a fiftieth of a busy machine.

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
import fcntl
import logging
import os
import signal
import subprocess
import sys
import termios
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from eukhe.clock import Cancellable, Clock, poll_until, wait_within
from eukhe.core import job as core
from eukhe.core.bound import Truncation
from eukhe.core.jobends import GroupMark, group_is_the_jobs
from eukhe.core.own_secrets import without_own_secrets
from eukhe.errors import EukheError
from eukhe.jobs.job import Job, JobSpec
from eukhe.jobs.table import JobTable
from eukhe.jobs.terminal import Terminal, set_size
from eukhe.jobs.wait import settle_or_detach
from eukhe.procs import (
    group_alive,
    has_controlling_terminal,
    job_signals_reset,
    kill_group,
    members_carrying,
    signal_group,
    start_ticks,
    stat_fields,
)
from eukhe.records.jobs import Detached, Settled
from eukhe.sandbox.group import Confine, SandboxGroup
from eukhe.sandbox.seccomp import keyring_filtered

F_SETPIPE_SZ = 1031  # fcntl: set a pipe's buffer size (Linux)
PIPE_BYTES = 1 << 18
"""A job's output pipe holds this much (the default is 64 KiB): a busy stream is read in few large reads."""
PIPE_BUDGET_BYTES = 1 << 24
"""At most this much widened pipe buffer per process at once (a quarter of Linux's default per-user soft limit,
past which every new pipe of the user gets two pages); jobs past it keep the default."""
DEFAULT_PIPE_BYTES = 1 << 16
_FOUR = bytes(4)
_widened = 0
log = logging.getLogger("eukhe.jobs")
GIVE_UP_MS = 10_000  # past the kill grace: a member that survives SIGKILL this long (stuck in the kernel) is given up
JOB_MARK_ENV = "EUKHE_JOB_MARK"
"""Every process of a bash job has this in its environment (unless it clears it): a random mark, which the job's
node records. A reopen after the job's host died ends the group left behind only if it is still the job's."""
EOF_AFTER_GROUP_MS = 1_000  # once the group is gone the pipe's EOF is due; only a process that left the group delays it


TTY_TERM = "xterm-256color"
"""$TERM of a tty job: what its screen's emulator (pyte) draws."""
TTY_PRELUDE = 'exec 0<>/proc/self/fd/0 1>&0 2>&0 && exec bash -c "$1"'
"""A tty job's first words: bash, the leader of a session without a controlling terminal, opens its terminal again
(by /proc, which names it in any mount namespace), so that it is the session's controlling terminal whatever bash
does on its own; then it runs the command as `bash -c` does."""


@dataclass(frozen=True, slots=True)
class TtySize:
    """A tty job's terminal size, in columns and rows."""

    cols: int
    rows: int


def tty_argv(command: str, *, confined: bool) -> list[str]:
    """The argv of a tty job: inside a sandbox (whose command is no session leader) `setsid` makes its session."""
    argv = ["bash", "-c", TTY_PRELUDE, "bash", command]
    return ["setsid", *argv] if confined else argv


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
    """The merged stdout+stderr pipe and the leader's exit, as futures; output goes to the job once it exists.

    The pipe is read here, not by an asyncio pipe transport: each read takes what the pipe holds (FIONREAD), so
    a read allocates exactly what it returns (the allocator then reuses that memory instead of mapping fresh pages
    for every read), and the pipe is widened so that many busy streams need few reads and few loop wake-ups."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.job: Job | None = None
        self.early: list[bytes] = []
        self.eof: asyncio.Future[None] = loop.create_future()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.fd: int | None = None
        self.size = DEFAULT_PIPE_BYTES
        self.widened = 0

    def read_from(self, fd: int) -> None:
        """Read the pipe's read end `fd` (made non-blocking) until its EOF; the pipe closes it then."""
        global _widened
        self.fd = fd
        os.set_blocking(fd, False)
        if _widened + PIPE_BYTES <= PIPE_BUDGET_BYTES:
            with contextlib.suppress(OSError):  # refused (a user past the soft limit): the default size stays
                self.size = fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_BYTES)
                self.widened = self.size
                _widened += self.widened
        self.loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        fd = self.fd
        if fd is None:
            return
        try:
            held = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, _FOUR), sys.byteorder)
            data = os.read(fd, held or self.size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close_output()
            return
        if self.job is None:
            self.early.append(data)
            return
        try:
            self.job.write(data)
        except Exception:  # a bug downstream: as an asyncio transport would, stop reading (never spin on it)
            log.exception("job %s: its output could not be taken; no more of it is read", self.job.id)
            self.close_output()

    def close_output(self) -> None:
        """Stop reading and close the read end (at its EOF, or when the job gives up on it); idempotent."""
        global _widened
        fd, self.fd = self.fd, None
        if fd is not None:
            self.loop.remove_reader(fd)
            os.close(fd)
            _widened -= self.widened
            self.widened = 0
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
        self.sandbox: SandboxGroup | None = None  # a confined job: the group inside the sandbox
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
        if self.sandbox is None:
            signal_group(self.pgid, signal.SIGTERM)
        elif not self.sandbox.terminate():
            kill_group(self.pgid)  # bwrap ended its report without naming the group inside: end all of it now
        deadline = self.clock.now_ms() + self.options.kill_grace_ms
        self._kill_timer = self.clock.call_at(deadline, self._kill)

    def _kill(self) -> None:
        kill_group(self.pgid)
        if self.sandbox is not None:
            self.sandbox.kill()

    def groups(self) -> list[int]:
        """The process groups a signal to the job goes to: its group (inside its sandbox when confined)."""
        if self.sandbox is not None:
            return [] if self.sandbox.pgid is None else [self.sandbox.pgid]
        return [self.pgid]

    def send(self, signum: int) -> None:
        """Send `signum` to the job's process groups (`jobs_signal`)."""
        for group in self.groups():
            signal_group(group, signum)

    def alive(self) -> bool:
        """Whether any process of the job is left: its group, and a confined job's group inside the sandbox."""
        return group_alive(self.pgid) or (self.sandbox is not None and self.sandbox.alive())

    async def supervise(self, job: Job) -> None:
        """Wait for the leader, drain, end the group, close the pipe, report the end."""
        done = False
        clock, options = self.clock, self.options
        try:
            await self.pipe.exited
            code = self.transport.get_returncode()
            await wait_within(clock, self.pipe.eof, options.drain_ms)
            if self.alive():
                self._terminate()
                give_up = clock.now_ms() + options.kill_grace_ms + GIVE_UP_MS
                await poll_until(clock, lambda: not self.alive(), give_up)
            await wait_within(clock, self.pipe.eof, max(options.drain_ms, EOF_AFTER_GROUP_MS))
            done = True
        finally:
            if not done:  # cancelled (the loop is closing): leave no process behind
                self._kill()
            if self.sandbox is not None:
                self.sandbox.reap()
                self.sandbox.close()
            if self._kill_timer is not None:
                self._kill_timer.cancel()
            self.transport.close()
            self.pipe.close_output()
        if job.kill_requested:
            job.finish(core.Killed())
        else:
            job.finish(core.exited(code if code is not None else 0))


class TtyRun(BashRun):
    """The owner of a tty job: a BashRun whose job is its terminal's whole session (every process group of it: an
    interactive shell makes one per command), inside a sandbox too (where the command's session is not bwrap's
    group). A kill hangs the session up (SIGHUP, as a terminal closing would) with its SIGTERM, and its SIGKILL
    reaches every process left in the session; its terminal closes with it."""

    terminal: Terminal
    sid: int | None = None  # the session, once the job took its terminal (it outlives the terminal's end)

    def session(self) -> int | None:
        if self.sid is None:
            found = self.terminal.session()
            self.sid = found if found is not None and found > 1 else None
        return self.sid

    def groups(self) -> list[int]:
        found = [self.session(), self.terminal.foreground()]
        groups = [group for group in dict.fromkeys(found) if group is not None and group > 1]
        return groups or super().groups()

    def members(self) -> list[int]:
        """The live processes of the job's session."""
        return [] if self.sid is None else session_members(self.sid)

    def _every_group(self) -> set[int]:
        groups = set(self.groups())
        for pid in self.members():
            with contextlib.suppress(OSError):
                groups.add(os.getpgid(pid))
        return groups

    def _terminate(self) -> None:
        if not self._terminating:
            self.session()
            for group in self._every_group():
                signal_group(group, signal.SIGHUP)
                signal_group(group, signal.SIGTERM)
        super()._terminate()

    def _kill(self) -> None:
        for group in self._every_group():
            kill_group(group)
        super()._kill()

    def alive(self) -> bool:
        return super().alive() or bool(self.members())

    async def supervise(self, job: Job) -> None:
        try:
            await super().supervise(job)
        finally:
            self.terminal.close()


def session_members(sid: int) -> list[int]:
    """The live (non-zombie) processes of session `sid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(int(entry))
        if fields is not None and len(fields) > 3 and fields[3] == b"%d" % sid and fields[0] != b"Z":
            found.append(int(entry))
    return found


async def start_bash(
    command: str,
    cwd: Path,
    *,
    truncation: Truncation,
    artifact_dir: Path | None,
    table: JobTable,
    options: BashOptions | None = None,
    env: Mapping[str, str] | None = None,
    confine: Confine | None = None,
    job_id: str | None = None,
    tty: TtySize | None = None,
) -> Job:
    """Start `bash -c command` in `cwd` as a job of `table` (kind "bash", title the command; under `job_id` when it
    is free); with `confine`, under the argv it makes (a sandbox: its `--info-fd` names the group inside, which a
    kill's SIGTERM goes to). With `tty`, on a pseudo-terminal of that size: its own session, whose controlling
    terminal it is; its output is read from the master side, its input written there (`job.terminal`)."""
    opts = options if options is not None else BashOptions()
    loop = asyncio.get_running_loop()
    terminal = has_controlling_terminal()
    mark = uuid.uuid4().hex
    job_env = without_own_secrets(os.environ if env is None else env)
    job_env[JOB_MARK_ENV] = mark  # a reopen after the host died knows the job's processes by it (see GroupMark)
    argv = ["bash", "-c", command] if tty is None else tty_argv(command, confined=confine is not None)
    if tty is not None:
        job_env["TERM"] = TTY_TERM
    info: SandboxGroup | None = None
    if confine is not None:
        info = SandboxGroup(loop)
        try:
            argv = confine(argv, info.write_end)
        except BaseException:  # the sandbox could not be set up (sandbox_unavailable): its pipe does not leak
            info.close()
            raise
    try:
        read_end, write_end = os.pipe() if tty is None else os.openpty()
    except BaseException:  # out of fds (EMFILE): the sandbox's report pipe does not leak either
        if info is not None:
            info.close()
        raise
    try:
        if tty is not None:
            set_size(read_end, tty.cols, tty.rows)
        with keyring_filtered(argv, confined=info is not None) as (launched, filter_fds):
            transport, pipe = await loop.subprocess_exec(
                _Pipe,
                *launched,
                stdin=subprocess.DEVNULL if tty is None else write_end,
                stdout=write_end,
                stderr=write_end,
                cwd=cwd,
                env=job_env,
                # Own process group always (a kill reaches the whole group). Own session too when the host has a
                # terminal, so a job never reads it; without one (a daemon worker), the job stays in the host's
                # session, so the kernel's autogroup scheduling does not weigh the host as one group against each of
                # its jobs. A tty job is a session of its own: its terminal is its controlling terminal.
                start_new_session=terminal or tty is not None,
                process_group=None if terminal or tty is not None else 0,
                pass_fds=() if info is None else (info.write_end, *filter_fds),
                preexec_fn=job_signals_reset(),  # only signal calls, and only when the host ignores or blocks them
            )
    except OSError as error:
        os.close(read_end)
        if info is not None:
            info.close()
        raise BashStartError(command, cwd, error.strerror or str(error)) from error
    finally:
        os.close(write_end)  # the child holds its copy: the EOF comes when the last writer closes it
        if info is not None:
            info.started()
    pipe.read_from(read_end)
    run = BashRun(transport, pipe, opts, table.clock) if tty is None else TtyRun(transport, pipe, opts, table.clock)
    run.sandbox = info
    screen: Terminal | None = None
    if isinstance(run, TtyRun) and tty is not None:
        screen = Terminal(os.dup(read_end), tty.cols, tty.rows, truncation, table.clock.now_ms)
        run.terminal = screen
    leader_start = start_ticks(run.pgid)  # None: the leader has ended already (its group may live on)
    group = None if leader_start is None else GroupMark(run.pgid, leader_start, mark)
    try:
        job = table.start(JobSpec("bash", command, truncation, artifact_dir, group=group), run, job_id=job_id)
    except BaseException:  # a closed table (JobTableClosedError) or a failing listener: leave no process behind
        run._kill()
        await wait_within(table.clock, pipe.exited, GIVE_UP_MS)  # reaped before the transport goes
        transport.close()
        pipe.close_output()
        if screen is not None:
            screen.close()
        raise
    job.terminal = screen
    run.job = job
    pipe.attach(job)
    run.task = asyncio.create_task(run.supervise(job), name=f"bash {job.id}")
    _RUNS.add(run.task)
    run.task.add_done_callback(_RUNS.discard)
    return job


def end_left_group(group: GroupMark, started_boot: str | None, boot: str | None) -> bool:
    """A reopen records a job of a host that died as ended: SIGKILL what is left of its process group, if that group
    is still the job's (`core.jobends.group_is_the_jobs`); True if it was. (A host that died with its supervisor
    gone leaves the group to init: nothing else would ever end it.)"""
    leader_start = start_ticks(group.group)
    # The members' environments are read (a scan of every process) only when the verdict needs them: leader gone.
    marked = 0 if leader_start is not None else members_carrying(group.group, f"{JOB_MARK_ENV}={group.mark}")
    if not group_is_the_jobs(group, started_boot, boot, leader_start, marked):
        return False
    kill_group(group.group)
    return True


_RUNS: set[asyncio.Task[None]] = set()  # strong references: a supervising task lives until its job ends


async def bash_and_wait(
    command: str,
    cwd: Path,
    *,
    truncation: Truncation,
    artifact_dir: Path | None,
    table: JobTable,
    budget_ms: int,
    timeout_ms: int | None = None,
    options: BashOptions | None = None,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[Job], None] | None = None,
    confine: Confine | None = None,
    job_id: str | None = None,
    tty: TtySize | None = None,
) -> Settled | Detached:
    """Start a bash job, wait at most `timeout_ms` within `budget_ms` (the session's; `core.deadline_for`): settled
    with its end, or detached with its output so far.

    Cancelling the call (Ctrl-C at the CLI) kills the job through its owner, waits for its end at most the call's
    span, then re-raises the cancellation (see `settle_or_detach`)."""
    started_ms = table.clock.now_ms()  # the span runs from the call, spawn included
    deadline_ms = core.deadline_for(started_ms, timeout_ms, budget_ms)
    job = await start_bash(
        command,
        cwd,
        truncation=truncation,
        artifact_dir=artifact_dir,
        table=table,
        options=options,
        env=env,
        confine=confine,
        job_id=job_id,
        tty=tty,
    )
    if on_start is not None:
        on_start(job)
    span_ms = deadline_ms - started_ms
    return job.answer(await settle_or_detach(job, deadline_ms, span_ms), span_ms)
