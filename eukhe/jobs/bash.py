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

A kill goes to the whole group and to each process of the job outside it: SIGTERM, then SIGKILL after a grace. It
works when the command closed stdout and stderr, because it never relies on the pipe. The owner reports the end only
once the leader has exited and no live process of the job remains, so a cancel that waits for the end finds no
survivor.

What the shell leaves runs on as a job (docs/jobs.md; the decisions are `eukhe.core.jobleft`'s). When the shell
exits, the processes it started and left get the drain (`drain_ms`) to end; those still running are handed over to a
new job of the same table, which takes the rest of the pipe's output, and the shell's job ends with the shell's code
and output, naming it. That job ends when its last process does (found and watched by `eukhe.jobs.left`), or at a
kill. On a kill asked before (or for a terminal's job), what is left is ended instead: SIGTERM, SIGKILL after the
grace. A confined shell is its own keeper: its EXIT trap holds the sandbox, which bwrap would end at its exit, while
processes are left. Once they are gone the rest of the pipe is read to its EOF (at most 1 s more: only a process
that left every way of finding it can hold it open, and we stop reading its output).
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eukhe.clock import Cancellable, wait_within
from eukhe.core import job as core
from eukhe.core import jobleft
from eukhe.core.bound import Truncation
from eukhe.core.jobends import GroupMark, group_is_the_jobs
from eukhe.core.own_launch import without_own_launch
from eukhe.core.own_secrets import without_own_secrets
from eukhe.errors import EukheError
from eukhe.jobs.job import Job, JobSpec
from eukhe.jobs.left import Keeper, reap, snapshot, until_gone
from eukhe.jobs.table import JobTable, JobTableClosedError
from eukhe.jobs.terminal import Terminal, set_size
from eukhe.jobs.wait import settle_or_detach
from eukhe.procs import (
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
TTY_PRELUDE = 'exec 0<>/proc/self/fd/1 1>&0 2>&0 && exec bash -c "$1"'
"""A tty job's first words: bash, the leader of a session without a controlling terminal, opens its terminal (its
stdout) again as its stdin (by /proc, which names it in any mount namespace), so that it is the session's
controlling terminal whatever bash does on its own; then it runs the command as `bash -c` does. A confined tty job's
stdin is /dev/null until then: every bash that leads a session opens the terminal its stdin names at its start, so
a bash before the sandbox (the limits' prelude) would take the terminal for the outer session, and the job's own
session could not have it."""


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
    drain_ms: int = 100  # after the leader exits, how long what it left may take to end before a job takes it


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
    """The owner of one bash job, and of the job of what its shell leaves running: kills them, watches the shell and
    what it left, reports each end (every wait on `clock`)."""

    can_hand_over = True  # what the shell leaves running goes on as a job of its own (core.jobleft.after_shell)

    def __init__(
        self, transport: asyncio.SubprocessTransport, pipe: _Pipe, options: BashOptions, table: JobTable
    ) -> None:
        self.transport = transport
        self.pipe = pipe
        self.options = options
        self.table = table
        self.clock = table.clock
        pid = transport.get_pid()
        assert pid is not None
        self.pgid = pid  # start_new_session: the leader's pid is the group's id
        self.sandbox: SandboxGroup | None = None  # a confined job: the group inside the sandbox
        self.keeper: Keeper | None = None  # a confined job's keeper (a terminal's job has none)
        self.mark = b""  # the job's EUKHE_JOB_MARK item: an unconfined job's processes carry it
        self.job: Job | None = None
        self.left_job: Job | None = None  # the job of what the shell left running, once it handed them over
        self.task: asyncio.Task[None] | None = None
        self._kill_timer: Cancellable | None = None
        self._again_timer: Cancellable | None = None
        self._shell_done = False  # the shell exited (or, confined, reported its exit)
        self._seen: dict[int, int] = {}  # the job's processes the last reading found (pid: start), to reap later
        self._terminating = False
        self._give_up_ms: int | None = None  # once a kill began: when its wait for the end gives up
        self._kill_begun: asyncio.Future[None] = pipe.loop.create_future()

    def kill(self, job: Job) -> None:
        """SIGTERM to every process of the job now (its group and what left the group), SIGKILL after the grace;
        the end comes when they are gone. The same for the job of what the shell left."""
        self._terminate()

    def _terminate(self) -> None:
        if self._terminating:
            return
        self._terminating = True
        if self.sandbox is None:
            self._signal_left(signal.SIGTERM, [self.pgid])
        elif self.sandbox.terminate():  # it sent the SIGTERM to the group inside
            self._signal_left(signal.SIGTERM, [], [] if self.sandbox.pgid is None else [self.sandbox.pgid])
        else:
            kill_group(self.pgid)  # bwrap ended its report without naming the group inside: end all of it now
        now = self.clock.now_ms()
        self._kill_timer = self.clock.call_at(now + self.options.kill_grace_ms, self._kill)
        if self.keeper is not None:
            self._again_timer = self.clock.call_at(now + self.options.drain_ms, self._terminate_shell_again)
        self._give_up_ms = now + self.options.kill_grace_ms + GIVE_UP_MS
        if not self._kill_begun.done():
            self._kill_begun.set_result(None)

    def _kill(self) -> None:
        if self.sandbox is None:
            self._signal_left(signal.SIGKILL, [self.pgid])
        else:
            kill_group(self.pgid)  # bwrap, whose --die-with-parent takes the namespace along
            self.sandbox.kill()

    def _signal_left(self, signum: int, groups: list[int], sent: list[int] | None = None) -> None:
        """Send `signum` to `groups` that still hold a process of the job, and to each process of it outside them
        and outside the groups it was `sent` to already (one that left the group: a daemon's setsid). A group is
        signalled only while it holds one, so a number an emptied group freed never names another."""
        procs = self._left_procs()
        held = {proc.group for proc in procs}
        for group in groups:
            if group in held:
                signal_group(group, signum)
        covered = {*groups, *(sent or ())}
        for proc in procs:
            if proc.group not in covered:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signum)

    def _terminate_shell_again(self) -> None:
        """A kill's SIGTERM once more to a confined shell if it still runs a moment later: its EXIT trap (the
        keeper's) makes it catch SIGTERM, and one that comes as it starts a command is lost while it waits for it."""
        if self._shell_done or self.sandbox is None:
            return
        init = self.sandbox.init()
        if init is None:
            return
        for proc in snapshot(jobleft.Confined(init), mark=self.mark):
            if proc.parent == init and proc.inner_pid == jobleft.KEEPER_INNER_PID and proc.alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signal.SIGTERM)

    def _terminate_again(self) -> None:
        """The shell exited during a kill: each process of the job still there hears the SIGTERM once more, since one
        the shell was forking when it was sent (between its fork and its exec) can have missed it."""
        for pid in self.left():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)

    def groups(self) -> list[int]:
        """The process groups a signal to the job goes to: its group (inside its sandbox when confined)."""
        if self.sandbox is not None:
            return [] if self.sandbox.pgid is None else [self.sandbox.pgid]
        return [self.pgid]

    def send(self, signum: int) -> None:
        """Send `signum` to the job's process groups (`jobs_signal`)."""
        for group in self.groups():
            signal_group(group, signum)

    def kin(self) -> jobleft.Kin | None:
        """Where the job's processes are found (`core.jobleft`); None for a sandbox that named no pid 1."""
        if self.sandbox is None:
            return jobleft.Unconfined(os.getpid(), self.pgid)
        init = self.sandbox.init()
        return None if init is None else jobleft.Confined(init, keeper=self.keeper is not None)

    def _left_procs(self) -> list[jobleft.Proc]:
        """The live processes of the job now (the shell too, while it runs); an unconfined job's host reaps the
        ended ones that were the job's."""
        kin = self.kin()
        if kin is None:
            return []
        procs = snapshot(kin, mark=self.mark, others=_LEADERS, ours=self._seen)
        if isinstance(kin, jobleft.Unconfined):
            reap(jobleft.reapable(procs, kin, self.pgid, self._seen), procs)
        found = jobleft.members(procs, kin)
        left = [proc for proc in procs if proc.pid in found]
        present = {proc.pid for proc in procs}  # an ended child of the host stays listed until it is reaped
        self._seen = {pid: start for pid, start in self._seen.items() if pid in present}
        self._seen.update((proc.pid, proc.start) for proc in left)
        return left

    def left(self) -> dict[int, int]:
        """The live processes of the job now, each with its start (pid: clock ticks)."""
        return {proc.pid: proc.start for proc in self._left_procs()}

    async def _until_gone(self, deadline_ms: int | None) -> bool:
        """Wait until no process of the job is left, or `deadline_ms` (None: none) passes; once a kill began, at
        most until its wait gives up."""

        def deadline() -> int | None:
            found = [ms for ms in (deadline_ms, self._give_up_ms) if ms is not None]
            return min(found) if found else None

        return await until_gone(self.left, self.clock, deadline, self._kill_begun)

    async def _shell_exit(self) -> int | None:
        """Wait for the shell's exit; its code. Confined, the keeper reports it when processes are left (bwrap lives
        on); else bwrap's own end answers, with the shell's code."""
        keeper = self.keeper
        if keeper is None:
            await self.pipe.exited
            return self.transport.get_returncode()
        either: list[asyncio.Future[Any]] = [keeper.code, self.pipe.exited]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        keeper.read_now()  # bwrap ended: all the keeper wrote is there
        code = keeper.code.result() if keeper.code.done() else None
        if code is None or self.pipe.exited.done():  # bwrap's code is the shell's own (a signal's too)
            await self.pipe.exited
            return self.transport.get_returncode()
        return code

    def _hand_over(self, job: Job, code: int | None) -> Job | None:
        """A new job takes what the shell left: it starts, then the rest of the output goes to it, then the shell's
        job ends with the shell's code (in that order, all at once: every byte goes to exactly one of them, and the
        shell's answer names the new job). None when no job can start (the host quits)."""
        try:
            taken = self.table.start(replace(job.spec, written=b""), self)
        except JobTableClosedError:
            return None
        self.left_job = taken
        self.pipe.job = taken
        job.left_as = taken.id
        job.finish(jobleft.shell_end(code, kill_asked=False))
        return taken

    async def _sandbox_gone(self) -> None:
        """A confined job's last wait: bwrap ends once its keeper did, and pid 1 with it (reaped at the end)."""
        sandbox = self.sandbox
        if sandbox is None:
            return
        await wait_within(self.clock, self.pipe.exited, GIVE_UP_MS)
        init = sandbox.init()
        start = None if init is None else start_ticks(init)
        if init is not None and start is not None:
            give_up = self.clock.now_ms() + GIVE_UP_MS
            await until_gone(lambda: {init: start} if sandbox.alive() else {}, self.clock, lambda: give_up)

    async def supervise(self, job: Job) -> None:
        """Wait for the shell's exit; give what it left the drain to end; hand what is still left over to a new
        job (or end it, on a kill); wait for the last process; close the pipe; report each end."""
        done = False
        clock, options = self.clock, self.options
        ended = job
        code: int | None = None
        try:
            code = await self._shell_exit()
            self._shell_done = True
            _LEADERS.pop(self.pgid, None)
            gone = await self._until_gone(clock.now_ms() + options.drain_ms)
            verdict = jobleft.after_shell(
                kill_asked=job.kill_requested, left=not gone, can_hand_over=self.can_hand_over
            )
            taken = self._hand_over(job, code) if verdict is jobleft.AfterShell.HANDS_OVER else None
            if taken is not None:
                ended = taken
                await self._until_gone(None)
            elif not gone:
                if self._terminating:
                    self._terminate_again()
                self._terminate()
                await self._until_gone(None)
            if self.keeper is not None:
                self.keeper.release()
            await self._sandbox_gone()
            await wait_within(clock, self.pipe.eof, max(options.drain_ms, EOF_AFTER_GROUP_MS))
            done = True
        finally:
            _LEADERS.pop(self.pgid, None)
            if not done:  # cancelled (the loop is closing): leave no process behind
                self._kill()
            if self.keeper is not None:
                self.keeper.release()
            if self.sandbox is not None:
                self.sandbox.reap()
                self.sandbox.close()
            for timer in (self._kill_timer, self._again_timer):
                if timer is not None:
                    timer.cancel()
            self.transport.close()
            self.pipe.close_output()
        if ended is job:
            if self.keeper is not None and self.pipe.exited.done():
                code = self.transport.get_returncode()  # bwrap's: the shell's own, also when a signal ended it
            job.finish(jobleft.shell_end(code, job.kill_requested))
        else:
            ended.finish(jobleft.left_end(ended.kill_requested))


class TtyRun(BashRun):
    """The owner of a tty job: a BashRun whose job is its terminal's whole session (every process group of it: an
    interactive shell makes one per command), inside a sandbox too (where the command's session is not bwrap's
    group). A kill hangs the session up (SIGHUP, as a terminal closing would) with its SIGTERM, and its SIGKILL
    reaches every process left in the session; its terminal closes with it."""

    can_hand_over = False  # its terminal's session ends with it, as a terminal closing ends it
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

    def left(self) -> dict[int, int]:
        found = super().left()
        for pid in self.members():
            start = start_ticks(pid)
            if start is not None:
                found.setdefault(pid, start)
        return found

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
    job_env = without_own_launch(
        without_own_secrets(os.environ if env is None else env), (sys.prefix, os.path.realpath(sys.prefix))
    )
    job_env[JOB_MARK_ENV] = mark  # a reopen after the host died knows the job's processes by it (see GroupMark)
    argv = ["bash", "-c", command] if tty is None else tty_argv(command, confined=confine is not None)
    if tty is not None:
        job_env["TERM"] = TTY_TERM
    info: SandboxGroup | None = None
    keeper: Keeper | None = None
    if confine is not None:
        info = SandboxGroup(loop)
        try:
            if tty is None:  # bwrap ends its namespace with its command: the keeper holds it for what is left
                keeper = Keeper(loop)
                job_env = keeper.env(job_env)
            argv = confine(argv, info.write_end)
        except BaseException:  # the sandbox could not be set up (sandbox_unavailable): its pipes do not leak
            _close_sandbox(info, keeper)
            raise
    try:
        read_end, write_end = os.pipe() if tty is None else os.openpty()
    except BaseException:  # out of fds (EMFILE): the sandbox's report pipes do not leak either
        _close_sandbox(info, keeper)
        raise
    try:
        if tty is not None:
            set_size(read_end, tty.cols, tty.rows)
        with keyring_filtered(argv, confined=info is not None) as (launched, filter_fds):
            transport, pipe = await loop.subprocess_exec(
                _Pipe,
                *launched,
                stdin=subprocess.DEVNULL if tty is None or info is not None else write_end,
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
                pass_fds=_passed(info, keeper, filter_fds),
                preexec_fn=job_signals_reset(),  # only signal calls, and only when the host ignores or blocks them
            )
    except OSError as error:
        os.close(read_end)
        _close_sandbox(info, keeper)
        raise BashStartError(command, cwd, error.strerror or str(error)) from error
    finally:
        os.close(write_end)  # the child holds its copy: the EOF comes when the last writer closes it
        if info is not None:
            info.started()
        if keeper is not None:
            keeper.started()
    pipe.read_from(read_end)
    run = BashRun(transport, pipe, opts, table) if tty is None else TtyRun(transport, pipe, opts, table)
    run.sandbox = info
    run.keeper = keeper
    run.mark = f"{JOB_MARK_ENV}={mark}".encode()
    screen: Terminal | None = None
    if isinstance(run, TtyRun) and tty is not None:
        screen = Terminal(os.dup(read_end), tty.cols, tty.rows, truncation, table.clock.now_ms)
        run.terminal = screen
    leader_start = start_ticks(run.pgid)  # None: the leader has ended already (its group may live on)
    group = None if leader_start is None else GroupMark(run.pgid, leader_start, mark)
    if leader_start is not None:
        _LEADERS[run.pgid] = leader_start
    try:
        job = table.start(JobSpec("bash", command, truncation, artifact_dir, group=group), run, job_id=job_id)
    except BaseException:  # a closed table (JobTableClosedError) or a failing listener: leave no process behind
        _LEADERS.pop(run.pgid, None)
        run._kill()
        if keeper is not None:
            keeper.release()
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
_LEADERS: dict[int, int] = {}
"""The shells of this host's running bash jobs (pid: start): children of the host that are no other job's, whose
environment a job's search for its own processes does not read."""


def _passed(info: SandboxGroup | None, keeper: Keeper | None, filter_fds: tuple[int, ...]) -> tuple[int, ...]:
    """The descriptors a launch passes on: the sandbox's report, the keeper's, the keyring filter's."""
    if info is None:
        return ()
    return (info.write_end, *(() if keeper is None else keeper.fds), *filter_fds)


def _close_sandbox(info: SandboxGroup | None, keeper: Keeper | None) -> None:
    """A launch that failed: the sandbox's and the keeper's descriptors do not leak."""
    if info is not None:
        info.close()
    if keeper is not None:
        keeper.release()


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
