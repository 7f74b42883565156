"""What a worker hosts: one open session (`eukhe.kernel.session_kernel.KernelSession`), answering its requests.

`open_host` opens (or creates) the session in the worker's working directory, reading its journal once;
`SessionHost.handle` dispatches one request through a table of handlers, each a Session API call whose answer is
the record the protocol sends as it is; `close` closes the session (its running jobs end).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

from eukhe.calls import ToolCalls, calls_of
from eukhe.calls.runner import cancelled_answer
from eukhe.children import AgentSession
from eukhe.children.family import AgentSessions
from eukhe.clock import Clock, MonotonicClock, poll_until, sleep_ms
from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.daemon.protocol import JSON, Request
from eukhe.daemon.server import EventSink, RequestError
from eukhe.errors import InputError
from eukhe.fs.serve import run as run_file_tool
from eukhe.jobs.job import Job
from eukhe.jobs.wait import CallCancelledError
from eukhe.paths import sessions_root
from eukhe.private_fs import open_private_file
from eukhe.records.base import decode_json
from eukhe.records.children import ChildReport, ChildRow, ParentMessage, Reports, Roster, RunEnd, RunRequest
from eukhe.records.daemon import (
    CREATION_ENV,
    WORKER_OPS,
    BashArgs,
    CallList,
    CallsArgs,
    CallStarted,
    ChildrenCollectArgs,
    ChildrenDeleteArgs,
    ChildrenSpawnArgs,
    ChildRunArgs,
    CullAnswer,
    CullArgs,
    EntryRow,
    FsEditArgs,
    FsGlobArgs,
    FsGrepArgs,
    FsReadArgs,
    FsWriteArgs,
    IpythonArgs,
    JobArgs,
    JobSignalArgs,
    JobUpdate,
    JobWaitArgs,
    JobWriteArgs,
    Pins,
    Pong,
    RemoteCallArgs,
    RewindArgs,
    SandboxCreation,
    SessionArgs,
    SessionPong,
    SessionShow,
    ToolCallAnswer,
    ToolCallArgs,
    WatchEnded,
)
from eukhe.records.jobs import CallAnswer, JobList, Rewound
from eukhe.records.network import NetworkLog
from eukhe.records.remote import RemoteCallAnswer, RemoteList
from eukhe.records.sandbox import SandboxChoice, SandboxPolicy
from eukhe.records.tty import Attached, InputTaken, JobAttachArgs, JobInputArgs, JobWriteAnswer, Signalled
from eukhe.store import dirs

LOCK_NAME = dirs.WORKER_LOCK_NAME
LOCK_WAIT_ENV = "EUKHE_SESSION_LOCK_WAIT_MS"
LOCK_WAIT_MS = 30_000
"""How long a worker waits for an older worker (one whose supervisor died) to let go of the session."""

WATCH_POLL_MS = 200
"""How often `watch` looks at the running jobs' output counters (job progress is not on the call board)."""


class SessionBusyError(RequestError):
    """Another worker still holds the session open (e.g. one left by a supervisor that died, still closing)."""

    def __init__(self, session_id: str) -> None:
        super().__init__("session_busy", f"session {session_id} is still open in another worker; try again")


class WrongSessionError(RequestError):
    """A request named a session this worker does not serve (one for the session it served before a fork, say):
    refused, never served on this worker's session."""

    def __init__(self, asked: str, served: str) -> None:
        message = f"session {asked}: this worker serves session {served}"
        super().__init__("wrong_session", message, field="args.session", details={"session": asked, "serves": served})
        self.session = asked


async def lock_session(session_id: str) -> int:
    """Take the session's worker lock, waiting (bounded) for a previous holder; the locked descriptor."""
    wait_ms = int(os.environ.get(LOCK_WAIT_ENV, LOCK_WAIT_MS))
    fd = open_private_file(sessions_root() / session_id / LOCK_NAME, os.O_RDWR)

    def taken() -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    try:
        clock = MonotonicClock()
        if not await poll_until(clock, taken, clock.now_ms() + wait_ms):
            raise SessionBusyError(session_id)
    except BaseException:  # busy past the deadline, or cancelled while waiting: the descriptor is not leaked
        os.close(fd)
        raise
    return fd


Handler = Callable[["SessionHost", Any, EventSink], Awaitable[JSON]]


class SessionHost:
    """The session a worker serves, behind the protocol; it holds the session's worker lock while open."""

    def __init__(self, session: AgentSession, lock_fd: int, clock: Clock | None = None) -> None:
        self.session = session
        self.clock: Clock = clock or MonotonicClock()
        self._lock_fd = lock_fd
        self.watchers = 0  # live `watch` streams (each ends when its client leaves)
        self.requests = 0  # requests being answered (the supervisor's own questions not counted)
        self.active_at_ms = self.clock.now_ms()
        """When the session last did anything: a request answered, a job ended (idle culling counts from here)."""
        self.last_artifacts: list[str] = []
        """The artifacts the last answer named (an artifact collection keeps them)."""
        self._unsubscribe = session.job_table.subscribe(self)
        self.calls = ToolCalls.of(session)
        self.socket: str | None = None
        """Where this worker listens (set once it is bound)."""
        self.retiring = False
        """Idle culling found the session idle: the supervisor stops this worker next. A direct request is refused
        from then on (`worker_retiring`), so none starts in a worker that is about to stop."""

    def job_started(self, job: Job) -> None:
        self.active_at_ms = self.clock.now_ms()

    def job_ended(self, job: Job, end: object) -> None:
        self.active_at_ms = self.clock.now_ms()

    @property
    def session_id(self) -> str:
        """The hosted session's id (after a fork: the fork's, which this worker goes on serving)."""
        return self.session.id

    async def handle(self, request: Request, emit: EventSink) -> JSON:
        """Answer one request through the Session API (the table below names each op's handler)."""
        handler = HANDLERS.get(request.op)
        if handler is None:
            raise RequestError("unknown_op", f"a session worker does not answer {request.op!r}")
        asked = getattr(request.args, "session", None)
        if asked is not None and asked != self.session_id:
            raise WrongSessionError(asked, self.session_id)
        if request.op in WORKER_OPS:
            return await handler(self, request.args, emit)
        self.requests += 1
        self.active_at_ms = self.clock.now_ms()
        try:
            answer = await handler(self, request.args, emit)
        finally:
            self.requests -= 1
            self.active_at_ms = self.clock.now_ms()
        if request.op in CALL_OPS:
            self.last_artifacts = artifacts_named(answer)
        return answer

    async def handle_direct(self, request: Request, emit: EventSink) -> JSON:
        """A request from a client that reached this worker's socket itself, not through the supervisor (the calls
        of `eukhe mcp`): the supervisor's own questions are refused as to any client (`unknown_op`), and every
        request once the worker is retiring (the client asks the supervisor instead, which reopens the session)."""
        if request.op in WORKER_OPS:
            raise RequestError("unknown_op", f"unknown request {request.op!r}")
        if self.retiring:
            raise RequestError("worker_retiring", f"session {self.session_id}: its worker stops (idle); ask the daemon")
        return await self.handle(request, emit)

    async def cull(self, args: CullArgs, emit: EventSink) -> CullAnswer:
        """Idle culling, as the supervisor asks (after Jupyter's): stop the kernel if nothing runs on it and it has
        been idle `kernel_idle_ms`; then say whether the session is idle: no job running, no live kernel, no watcher,
        no request being answered, no child running, and nothing done for `session_idle_ms`."""
        session = self.session
        manager = session.kernel
        live = manager is not None and manager.pid is not None
        kernel_idle = manager.idle_s() if manager is not None and live else None
        culled = False
        due = kernel_idle is not None and 0 < args.kernel_idle_ms <= kernel_idle * 1000
        if manager is not None and kernel_idle is not None and due and not manager.busy:
            await manager.kill(snapshot=True)  # the next cell starts a fresh kernel, with the variables of this one
            culled, live = True, False
        busy: list[str] = []
        if session.job_table.running():
            busy.append("jobs")
        if live:
            busy.append("kernel")
        if self.watchers:
            busy.append("watchers")
        if self.requests:
            busy.append("requests")
        if session.children_running():
            busy.append("children")
        idle_ms = self.clock.now_ms() - self.active_at_ms
        idle = args.session_idle_ms > 0 and not busy and idle_ms >= args.session_idle_ms
        self.retiring = self.retiring or idle
        return CullAnswer(
            session=session.id,
            kernel_culled=culled,
            kernel_idle_s=None if kernel_idle is None else round(kernel_idle, 3),
            idle=idle,
            idle_s=idle_ms / 1000,
            busy=busy,
        )

    async def pins(self, args: SessionArgs, emit: EventSink) -> Pins:
        return Pins(session=self.session.id, artifacts=list(self.last_artifacts))

    async def ping(self, args: Any, emit: EventSink) -> Pong:
        return Pong(pong=True, pid=os.getpid(), version=1, session=self.session.id)

    async def session_ping(self, args: SessionArgs, emit: EventSink) -> SessionPong:
        session = self.session
        return SessionPong(
            session=session.id, pid=os.getpid(), cwd=str(session.cwd), watchers=self.watchers, socket=self.socket
        )

    async def show(self, args: SessionArgs, emit: EventSink) -> SessionShow:
        session = self.session
        return SessionShow(
            id=session.id,
            cwd=str(session.cwd),
            settings=session.settings,
            kernel_transport=session.kernel_transport,
            sandbox=session.sandbox.policy,
            leaf=session.leaf,
            entries=[EntryRow(id=e.id, parent=e.parent, kind=e.kind, content=e.content) for e in session.entries()],
            running_jobs=[job.id for job in session.job_table.running()],
            job_nodes=sorted(session.view_state().of_type(JOB_DOC_TYPE)),
        )

    async def bash(self, args: BashArgs, emit: EventSink) -> CallAnswer:
        return await self._call(
            lambda on_start: self.session.execute_bash_and_wait(
                args.command, args.budget_ms, on_start=on_start, tty=args.tty, cols=args.cols, rows=args.rows
            ),
            "bash",
            emit,
        )

    async def ipython(self, args: IpythonArgs, emit: EventSink) -> CallAnswer:
        return await self._call(
            lambda on_start: self.session.ipython(args.code, args.budget_ms, on_start=on_start), "cell", emit
        )

    async def _call(
        self, run: Callable[[Callable[[str], None]], Awaitable[CallAnswer]], kind: str, emit: EventSink
    ) -> CallAnswer:
        """A blocking call: its job id goes out as a `started` event at once; a cancel (Ctrl-C at the CLI) kills
        the job through its owner, and the call answers `cancelled` with how it ended."""
        started: list[str] = []

        def on_start(job_id: str) -> None:
            started.append(job_id)
            emit(CallStarted(job=job_id, kind=kind))

        try:
            return await run(on_start)
        except asyncio.CancelledError:
            now = cancelled_answer(self.session, started)
            if now is None:
                raise
            raise CallCancelledError(now) from None

    async def tool_call(self, args: ToolCallArgs, emit: EventSink) -> ToolCallAnswer:
        """One tool call a model makes, journaled by the session (its start, its settle); with `events`, its call id
        and its job's go out as events at once; with `room`, its text fits what the asking client shows whole."""
        return await self.calls.call(
            args.tool, args.args, on_event=emit if args.events else None, api_key=args.api_key, room=args.room
        )

    async def session_calls(self, args: CallsArgs, emit: EventSink) -> CallList:
        return calls_of(self.session, args.call)

    async def session_network(self, args: SessionArgs, emit: EventSink) -> NetworkLog:
        return self.session.network()

    async def jobs_list(self, args: SessionArgs, emit: EventSink) -> JobList:
        return JobList(jobs=self.session.jobs.list())

    async def jobs_wait(self, args: JobWaitArgs, emit: EventSink) -> CallAnswer:
        return await self.session.jobs.wait(args.job, args.timeout_ms)

    async def jobs_cancel(self, args: JobArgs, emit: EventSink) -> CallAnswer:
        return await self.session.jobs.cancel(args.job)

    async def jobs_write(self, args: JobWriteArgs, emit: EventSink) -> JobWriteAnswer:
        return await self.session.jobs.write(args.job, args.input, args.budget_ms)

    async def jobs_signal(self, args: JobSignalArgs, emit: EventSink) -> Signalled:
        return self.session.jobs.signal(args.job, args.signal)

    async def jobs_attach(self, args: JobAttachArgs, emit: EventSink) -> Attached:
        """Stream a tty job's terminal until it ends or the client sends anything (`eukhe jobs attach`)."""
        self.watchers += 1  # an attached person keeps the session from an idle cull
        try:
            return await self.session.jobs.attach(args.job, emit, emit.drain)
        finally:
            self.watchers -= 1

    async def jobs_input(self, args: JobInputArgs, emit: EventSink) -> InputTaken:
        return await self.session.jobs.input(args.job, args.input)

    async def navigate(self, args: RewindArgs, emit: EventSink) -> Rewound:
        return await self.session.navigate_tree(args.entry)

    async def fork(self, args: RewindArgs, emit: EventSink) -> Rewound:
        rewound = await self.session.fork(args.entry)
        # This worker goes on in the fork: hold the fork's lock, let go of the old session's.
        fresh = await lock_session(rewound.session)
        os.close(self._lock_fd)
        self._lock_fd = fresh
        return rewound

    async def children_spawn(self, args: ChildrenSpawnArgs, emit: EventSink) -> ChildRow:
        return await self.session.children.spawn(
            args.name,
            args.code,
            workspace=args.workspace,
            timeout_ms=args.timeout_ms,
            prompt=args.prompt,
            model=args.model,
            api_key=args.api_key,
        )

    async def children_list(self, args: SessionArgs, emit: EventSink) -> Roster:
        return Roster(children=self.session.children.list())

    async def children_collect(self, args: ChildrenCollectArgs, emit: EventSink) -> Reports:
        return Reports(reports=await self.session.children.collect(args.names, args.timeout_ms))

    async def children_delete(self, args: ChildrenDeleteArgs, emit: EventSink) -> ChildReport:
        return await self.session.children.delete(args.name)

    async def child_run(self, args: ChildRunArgs, emit: EventSink) -> RunEnd:
        if (args.code is None) == (args.prompt is None):
            named = "code" if args.code is None else "prompt"
            raise InputError("bad_args", "a child's run takes its code or its prompt: exactly one", field=named)
        request = RunRequest(
            code=args.code,
            timeout_ms=args.timeout_ms,
            prompt=args.prompt,
            provider=args.provider,
            api_key=args.api_key,
        )
        return await self.session.run_as_child(request, lambda text: emit(ParentMessage(message=text).to_json()))

    async def watch(self, args: SessionArgs, emit: EventSink) -> WatchEnded:
        """Stream `watch_events` (tool call progress) and the running jobs' output counters until the client goes."""
        stream = self.session.watch_events()
        seen: dict[str, tuple[int, int, int, str]] = {}
        clock = self.clock

        async def jobs_progress() -> None:
            while True:
                for row in [job.row() for job in self.session.job_table.jobs()]:  # this life's: past ones never move
                    key = (row.bytes_kept, row.bytes_dropped, row.lines_kept, row.status)
                    if seen.get(row.id) != key:
                        seen[row.id] = key
                        emit(JobUpdate(job=row))
                await emit.drain()
                await sleep_ms(clock, WATCH_POLL_MS)

        poller = asyncio.create_task(jobs_progress())
        self.watchers += 1
        try:
            async for event in stream:
                emit(event)
                await emit.drain()
        finally:
            self.watchers -= 1
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await poller
            await stream.aclose()
        return WatchEnded(ended=True)

    async def remote_list(self, args: SessionArgs, emit: EventSink) -> RemoteList:
        return RemoteList(functions=self.session.remote.list())

    async def remote_call(self, args: RemoteCallArgs, emit: EventSink) -> RemoteCallAnswer:
        """A kernel function's result, or its typed error as the answer's `error` (not a protocol error)."""
        return await self.session.remote.answer(args.name, args.args, args.budget_ms)

    async def close(self) -> None:
        """Close the session: its running jobs end (killed), the writer commits what it holds; release the lock."""
        try:
            await self.session.close()
        finally:
            self._unsubscribe()
            os.close(self._lock_fd)


async def _files(host: SessionHost, args: Any, emit: EventSink) -> JSON:
    """`fs.read` ... `fs.glob` on the session's working directory: the op's record, decoded once, is its tool's
    arguments (each `Fs*Args` is the tool's record plus `session`)."""
    return await asyncio.to_thread(run_file_tool, host.session.files.context(), _FS_OPS[type(args)], args)


_FS_OPS: dict[type, str] = {
    FsReadArgs: "fs.read",
    FsWriteArgs: "fs.write",
    FsEditArgs: "fs.edit",
    FsGrepArgs: "fs.grep",
    FsGlobArgs: "fs.glob",
}

HANDLERS: dict[str, Handler] = {
    "ping": SessionHost.ping,
    "session.ping": SessionHost.session_ping,
    "session.show": SessionHost.show,
    "bash": SessionHost.bash,
    "ipython": SessionHost.ipython,
    "tool.call": SessionHost.tool_call,
    "session.calls": SessionHost.session_calls,
    "session.network": SessionHost.session_network,
    "jobs.list": SessionHost.jobs_list,
    "jobs.wait": SessionHost.jobs_wait,
    "jobs.cancel": SessionHost.jobs_cancel,
    "tree.navigate": SessionHost.navigate,
    "tree.fork": SessionHost.fork,
    "watch": SessionHost.watch,
    "children.spawn": SessionHost.children_spawn,
    "children.list": SessionHost.children_list,
    "children.collect": SessionHost.children_collect,
    "children.delete": SessionHost.children_delete,
    "child.run": SessionHost.child_run,
    "remote.list": SessionHost.remote_list,
    "remote.call": SessionHost.remote_call,
    "session.cull": SessionHost.cull,
    "session.pins": SessionHost.pins,
    **dict.fromkeys(_FS_OPS.values(), _files),
    "jobs.write": SessionHost.jobs_write,
    "jobs.signal": SessionHost.jobs_signal,
    "jobs.attach": SessionHost.jobs_attach,
    "jobs.input": SessionHost.jobs_input,
}
"""The requests a worker answers, each with its handler."""

CALL_OPS = frozenset(
    {"tool.call", "bash", "ipython", "jobs.wait", "jobs.cancel", "child.run", "children.collect", "jobs.write"}
)
"""The ops whose answer is a call's: the artifacts the last one names are kept by every artifact collection."""


def artifacts_named(answer: JSON) -> list[str]:
    """Every artifact path an answer names (an output window's `artifact`, at any depth)."""
    found: list[str] = []
    stack = [msgspec.to_builtins(answer)]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            artifact = item.get("artifact")
            if isinstance(artifact, str):
                found.append(artifact)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return sorted(set(found))


def creation_of(text: str | None) -> SandboxPolicy | SandboxChoice | None:
    """The sandbox a new session's worker was told of (None: the settings files')."""
    if not text:
        return None
    creation = decode_json(text.encode(), SandboxCreation, code="bad_args", what="the sandbox of a new session")
    return creation.policy if creation.policy is not None else creation.sandbox


async def open_host(session_id: str | None, cwd: Path, session_class: AgentSessions = AgentSession) -> SessionHost:
    """Open the saved session `session_id` in `cwd` (its journal read once), or create a new one when it is None."""
    if session_id is None:
        session = await session_class.create(cwd, sandbox=creation_of(os.environ.pop(CREATION_ENV, None)))
        try:
            return SessionHost(session, await lock_session(session.id))
        except BaseException:  # the new session is closed, its journal descriptor and writer task with it
            await session.close()
            raise
    dirs.saved_header(sessions_root(), session_id)  # UnknownSessionError before anything is made (one line read)
    lock = await lock_session(session_id)
    try:
        return SessionHost(await session_class.open(session_id, cwd=cwd), lock)
    except BaseException:
        os.close(lock)
        raise
