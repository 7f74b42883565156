"""The supervisor: the daemon's front door on `$TMPDIR/eukhe-<uid>/daemon.sock` (spec "Local access").

It makes the agent dir and sessions root private (or refuses to start), checks its socket dir, binds 0600, and
serves the client protocol. Session-scoped requests go to the session's worker, one process per open session,
started in the session's working directory (a gone directory fails the start with the spec's text). A worker that
dies is reported (log and `status`), what its jobs left is killed, and the session is reopened in a fresh worker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import msgspec

from eukhe.clock import Clock, MonotonicClock
from eukhe.core.delivery import reset_means_never_read
from eukhe.core.own_secrets import OWN_SECRETS
from eukhe.daemon.client import default_socket_path
from eukhe.daemon.local_access import (
    bind_private_socket,
    ensure_private_state_dirs,
    ensure_socket_dir,
    serve_private,
    socket_is_live,
)
from eukhe.daemon.orphans import become_subreaper, end_orphans
from eukhe.daemon.protocol import JSON, MAX_REPLY_BYTES, PROTOCOL_VERSION, Request, encode_request, to_builtins
from eukhe.daemon.replies import EVENT, RESULT, DaemonError, decode_reply, reply_outcome
from eukhe.daemon.server import NO_EVENTS, STREAMING_OPS, EventSink, RequestError, close_writer, serve_requests
from eukhe.daemon.spawning import ExecWorker, ForkServer, ForkServerError, WorkerProcess, fork_wanted
from eukhe.daemon.upkeep import Upkeeper, WorkerView
from eukhe.daemon.waits import bounded
from eukhe.errors import CATALOGUE, EukheError, resource_shortage
from eukhe.paths import sessions_root
from eukhe.private_fs import check_working_dir, open_private_file
from eukhe.records.base import Record, decode_json, encode
from eukhe.records.daemon import (
    CREATION_ENV,
    OPS,
    SESSION_OPS,
    CloseArgs,
    CreateArgs,
    DaemonStatus,
    DeleteArgs,
    GcArgs,
    GcReport,
    Pong,
    ReopenedWorker,
    SandboxCreation,
    SessionArgs,
    SessionClosed,
    SessionCreated,
    SessionDeleted,
    SessionList,
    SessionRow,
    Stopping,
    WorkerReady,
    WorkerReport,
    WorkerRow,
)
from eukhe.records.jobs import JobList, Rewound
from eukhe.store import dirs
from eukhe.store.journal import JournalFormatError

log = logging.getLogger("eukhe.daemon")

EXIT_ANOTHER_DAEMON = 75
"""Exit code of a daemon that found another one holding its socket (EX_TEMPFAIL): a client keeps polling."""
WORKER_READY_TIMEOUT_MS = 30_000
WORKER_STOP_GRACE_MS = 45_000
"""How long a stopping worker may take to close its session before it is killed: more than a close's own longest
wait (the default 30 s blocking budget for its jobs' ends, then their kill grace), so a close is not cut midway and
loses no end row."""
REPORTS_KEPT = 50
CRASH_LOOP_MS = 5_000
CRASH_LOOP_LIMIT = 3
"""A worker that dies this many times in a row within CRASH_LOOP_MS of its start is not reopened eagerly."""
FORK_RETRY_MS = 30_000
"""After the fork server failed to start, workers start the plain way for this long before it is tried again."""


class DaemonStartError(EukheError):
    """The daemon cannot start (another one holds the lock, or a start check failed)."""

    code = "daemon_start_failed"


class DaemonRunningError(DaemonStartError):
    """Another daemon holds this socket's lock (it is running, or starting right now)."""

    code = "daemon_running"
    exit_code = EXIT_ANOTHER_DAEMON


class WorkerUnreachableError(RequestError):
    """The worker's socket did not accept the connection: the request did not reach it (safe to send again)."""


class WorkerStartError(RequestError):
    """A session's worker did not start; the message is the worker's (e.g. `working directory is gone`)."""


A = TypeVar("A", bound=Record)

WorkerConnection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
IDLE_CONNECTIONS = 1
"""Idle connections kept per worker; more concurrent requests open more, and close them when answered. One: a worker
answered since the last request has exactly one connection from the supervisor open (the soak counts its fds)."""


@dataclass
class Worker:
    """One session's worker process as the supervisor sees it."""

    session_id: str
    cwd: str
    socket: Path
    process: WorkerProcess
    started_ms: int
    """When it was spawned, on the supervisor's clock (monotonic: a wall-clock step must not fake a crash loop)."""
    active_at_ms: int
    """When its last forwarded request ended (on the supervisor's clock; its spawn until then)."""
    closing: bool = False
    """Asked to stop (`session.close`, `session.delete`, idle culling): its end is not a death, and the session is not
    reopened until asked."""
    notices: list[str] = field(default_factory=list)
    """What its ready line said of the settings files (a new session's)."""
    inflight: int = 0
    """Client requests forwarded to it and not answered yet (a watch, a blocking call): idle culling waits for 0."""
    idle: list[WorkerConnection] = field(default_factory=list)
    """Connections to its socket whose last request was answered, kept for the next (a connect and the worker's peer
    check cost about a third of a millisecond); closed when it ends."""

    def view(self) -> WorkerView:
        """The worker as upkeep sees it."""
        return WorkerView(self.session_id, self.process.pid, self.inflight > 0, self.active_at_ms)

    def take_connection(self) -> WorkerConnection | None:
        """An idle connection still open, if any (one the worker closed is dropped)."""
        while self.idle:
            reader, writer = connection = self.idle.pop()
            if not (reader.at_eof() or writer.is_closing() or reader.exception() is not None):
                return connection
            writer.close()
        return None

    def close_idle(self) -> None:
        """Close the kept connections (the worker ended, or the daemon stops)."""
        idle, self.idle = self.idle, []
        for _, writer in idle:
            writer.close()


class Supervisor:
    """The daemon's supervisor: one per socket."""

    def __init__(self, socket_path: Path, clock: Clock | None = None) -> None:
        self.socket_path = socket_path
        self.clock: Clock = clock or MonotonicClock()
        self.workers: dict[str, Worker] = {}
        self.restarts: dict[str, int] = {}
        self.reports: list[WorkerReport] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._stop = asyncio.Event()
        self._stopping = False
        self._started_ms = self.clock.now_ms()
        self._monitors: set[asyncio.Task[None]] = set()
        self._spawned = 0
        self._spawned_keys = 0
        self.crash_loops = CrashLoops(self.clock)
        self._spawn_lock = asyncio.Lock()
        self.upkeep = Upkeeper(self, self.clock)
        self.fork_server = ForkServer(self.clock) if fork_wanted() else None
        self._fork_start: asyncio.Task[None] | None = None
        self._fork_failed_at_ms: int | None = None

    # --- lifecycle ------------------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Start checks, bind, serve until `stop` or a signal, then stop every worker; the exit code."""
        ensure_private_state_dirs()
        ensure_socket_dir(self.socket_path.parent)
        lock_fd = open_private_file(self.socket_path.parent / (self.socket_path.name + ".lock"), os.O_RDWR)
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise DaemonRunningError(f"another daemon holds {self.socket_path}") from None
            become_subreaper()
            self._remove_stale_worker_sockets()
            listener = bind_private_socket(self.socket_path)
            if self.fork_server is not None:  # warms up while the daemon already answers
                self._fork_start = asyncio.create_task(self.fork_server.start(self.socket_path))
            self.upkeep.start()
            try:
                await self._serve(listener)
            finally:
                listener.close()
                with contextlib.suppress(OSError):
                    os.unlink(self.socket_path)
                await self._stop_workers()
        finally:
            os.close(lock_fd)
        return 0

    async def _serve(self, listener: socket.socket) -> None:
        """Accept clients until stopped."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._stop.set)
        loop.add_signal_handler(signal.SIGINT, self._stop.set)
        log.info("daemon %d listening on %s", os.getpid(), self.socket_path)
        server = asyncio.create_task(serve_private(listener, self._connection, "supervisor", clock=self.clock))
        stopper = asyncio.create_task(self._stop.wait())
        await asyncio.wait({server, stopper}, return_when=asyncio.FIRST_COMPLETED)
        self._stopping = True
        for task in (server, stopper):
            task.cancel()
        await asyncio.gather(server, stopper, return_exceptions=True)
        if server.done() and not server.cancelled() and server.exception() is not None:
            log.error("listener failed: %s", server.exception())

    async def _stop_workers(self) -> None:
        """Close every worker's stdin, wait for them, kill the ones that linger; end all orphans."""
        self._stopping = True
        await self.upkeep.stop()
        await asyncio.gather(*(self._stop_worker(worker) for worker in list(self.workers.values())))
        for task in list(self._monitors):
            task.cancel()
        await asyncio.gather(*self._monitors, return_exceptions=True)
        if self.fork_server is not None:
            if self._fork_start is not None and not self._fork_start.done():
                self._fork_start.cancel()
                await asyncio.gather(self._fork_start, return_exceptions=True)
            await self.fork_server.stop()
        await end_orphans(keep=())
        log.info("daemon %d stopped", os.getpid())

    def lock_of(self, session_id: str) -> asyncio.Lock:
        """The lock a session's worker starts and stops under."""
        return self._locks.setdefault(session_id, asyncio.Lock())

    # --- what upkeep asks of the supervisor (upkeep.Supervised) ------------------------------------------------------

    def live_workers(self) -> list[WorkerView]:
        """The workers alive and not asked to stop."""
        return [w.view() for w in self.workers.values() if not w.closing and w.process.returncode is None]

    def _current(self, view: WorkerView) -> Worker | None:
        """The worker `view` was taken of, if it is still its session's, alive and not asked to stop."""
        worker = self.workers.get(view.session)
        if worker is None or worker.process.pid != view.pid or worker.closing or worker.process.returncode is not None:
            return None
        return worker

    @contextlib.asynccontextmanager
    async def holding(self, view: WorkerView) -> AsyncIterator[bool]:
        """Under the session's lock if it is free: True while the worker is still the session's and idle."""
        lock = self.lock_of(view.session)
        if lock.locked():  # a request is starting the worker, or a close is stopping it
            yield False
            return
        async with lock:
            worker = self._current(view)
            yield worker is not None and not worker.inflight

    async def ask(self, view: WorkerView, op: str, args: Record, answer: type[A]) -> A:
        """The supervisor's own question to the worker `view` was taken of."""
        worker = self._current(view)
        if worker is None:
            raise RequestError("worker_unavailable", f"session {view.session}: its worker {view.pid} is gone")
        return await self.ask_worker(worker, op, args, answer, request_id=op)

    async def stop_idle(self, view: WorkerView) -> None:
        """Stop the worker of an idle session (it reopens on its next request)."""
        worker = self._current(view)
        if worker is not None:
            worker.closing = True
            await self._stop_worker(worker)

    async def _stop_worker(self, worker: Worker, why: bytes = b"") -> None:
        """Close the worker's stdin (it closes its session and exits); kill it if it lingers past the grace (its
        monitor then ends what its jobs left). `why` (`session_closed`) goes first on stdin: the reason its running
        jobs' rows give (else `daemon_stopped`). The worker is out of the table when this returns."""
        worker.process.close_stdin(why + b"\n" if why else b"")
        try:
            await bounded(self.clock, worker.process.wait(), WORKER_STOP_GRACE_MS)
        except TimeoutError:
            log.warning(
                "worker %d of session %s did not close within %d ms: killed",
                worker.process.pid,
                worker.session_id,
                WORKER_STOP_GRACE_MS,
            )
            worker.process.kill()
            await worker.process.wait()
        if self.workers.get(worker.session_id) is worker:  # out of the table when its stop returns (its monitor
            del self.workers[worker.session_id]  # may run later): a report or an answer after it never lists it

    # --- requests -------------------------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_requests(reader, writer, self.handle)

    async def handle(self, request: Request, emit: EventSink) -> JSON:
        """Answer one client request: the supervisor's own ops from its table; a session's, through its worker."""
        own = self.OWN_OPS.get(request.op)
        if own is not None:
            return await own(self, request)
        if request.op == "session.close":
            return await self.close_session(request, emit)
        if request.op == "session.delete":
            return await self.delete_session(request, emit)
        if request.op not in SESSION_OPS:  # the supervisor's own questions to workers included
            raise RequestError("unknown_op", f"unknown request {request.op!r}")
        session_id: str = request.args.session
        for attempt in (1, 2):
            worker = await self._lease(session_id)
            try:
                answer = Rewound if request.op == "tree.fork" else None  # the fork's id: the worker goes on in it
                result = await self.forward(worker, request, emit, answer)
            except WorkerUnreachableError:
                if attempt == 2:
                    raise
                # The request never reached the worker (it is dying): wait for its end, reopen, send it once more.
                with contextlib.suppress(TimeoutError):
                    await bounded(self.clock, worker.process.wait(), WORKER_STOP_GRACE_MS)
                continue
            finally:
                worker.inflight -= 1
                worker.active_at_ms = self.clock.now_ms()
            if isinstance(result, Rewound) and request.op == "tree.fork":
                self._rekey(worker, result.session)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _lease(self, session_id: str) -> Worker:
        """The session's live worker (started, reopening the session, if none runs), counted as busy until the
        caller's request ends: under the session's lock, so idle culling sees either the lease or no worker."""
        async with self._locks.setdefault(session_id, asyncio.Lock()):
            worker = await self._live_worker(session_id)
            worker.inflight += 1
            return worker

    async def ping(self, request: Request) -> Pong:
        return Pong(pong=True, pid=os.getpid(), version=PROTOCOL_VERSION)

    async def status_op(self, request: Request) -> DaemonStatus:
        return self.status()

    async def stop(self, request: Request) -> Stopping:
        asyncio.get_running_loop().call_soon(self._stop.set)
        return Stopping(stopping=True, pid=os.getpid())

    async def list_sessions(self, request: Request) -> SessionList:
        """Every saved session, from the first line of each journal (none is parsed)."""
        root = sessions_root()
        rows: list[SessionRow] = []
        for session_id in dirs.saved_session_ids(root):
            try:
                header = dirs.saved_header(root, session_id)
            except (dirs.UnknownSessionError, JournalFormatError):
                continue
            rows.append(
                SessionRow(
                    id=session_id, cwd=header.cwd, forked_from=header.forked_from, open=session_id in self.workers
                )
            )
        return SessionList(sessions=rows)

    async def create(self, request: Request) -> SessionCreated:
        return await self.create_session(request.args)

    async def close_session(self, request: Request, emit: EventSink) -> SessionClosed:
        """Stop a session's worker: its kernel and jobs end, the session stays on disk and reopens when asked.
        Refused (`session_has_jobs`) while jobs run, unless `force`."""
        args: CloseArgs = request.args
        dirs.saved_header(sessions_root(), args.session)  # unknown_session
        async with self._locks.setdefault(args.session, asyncio.Lock()):
            worker = await self._close_worker(args.session, args.force, "close", request.id)
        self.upkeep.forget(args.session)
        if worker is None:
            return SessionClosed(session=args.session, was_open=False)
        log.info("session %s closed (worker %d)", args.session, worker.process.pid)
        return SessionClosed(session=args.session, was_open=True)

    async def delete_session(self, request: Request, emit: EventSink) -> SessionDeleted:
        """Stop the session's worker as a close does (with the same refusal), then remove its directory, its
        artifacts and its workspaces. No other process may hold the session (its `worker.lock`): `session_busy`."""
        args: DeleteArgs = request.args
        root = sessions_root()
        dirs.saved_header(root, args.session)  # unknown_session
        async with self._locks.setdefault(args.session, asyncio.Lock()):
            worker = await self._close_worker(args.session, args.force, "delete", request.id)
            try:
                held = open_private_file(root / args.session / dirs.WORKER_LOCK_NAME, os.O_RDWR)
            except OSError as error:
                raise RequestError("bad_path", f"session {args.session}: {error.strerror or error}") from error
            try:
                try:
                    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise RequestError(
                        "session_busy", f"session {args.session} is still open in another worker; try again"
                    ) from None
                removed = await asyncio.to_thread(dirs.remove_session, root, args.session)
            finally:
                os.close(held)
        self.upkeep.forget(args.session)
        self.restarts.pop(args.session, None)
        self.crash_loops.forget(args.session)
        log.info("session %s deleted: %s", args.session, ", ".join(removed))
        return SessionDeleted(session=args.session, was_open=worker is not None, removed=removed)

    async def _close_worker(self, session_id: str, force: bool, what: str, request_id: int | str) -> Worker | None:
        """Under the session's lock: stop its live worker, refusing (`session_has_jobs`) while jobs run unless
        `force`; the worker stopped, or None when none ran."""
        worker = self.workers.get(session_id)
        if worker is None or worker.process.returncode is not None:
            return None
        if not force:
            jobs = await self.ask_worker(worker, "jobs.list", SessionArgs(session=session_id), JobList, request_id)
            running = [row.id for row in jobs.jobs if row.status == "running"]
            if running:
                raise RequestError(
                    "session_has_jobs",
                    f"session {session_id} has running jobs ({', '.join(running)}): {what} it with force to kill them",
                    details={"jobs": running},
                )
        worker.closing = True
        await self._stop_worker(worker, b"session_closed")
        return worker

    async def gc(self, request: Request) -> GcReport:
        args: GcArgs = request.args
        return await self.upkeep.collect(dry_run=args.dry_run)

    OWN_OPS: ClassVar[dict[str, Callable[[Supervisor, Request], Awaitable[JSON]]]] = {
        "ping": ping,
        "status": status_op,
        "stop": stop,
        "session.create": create,
        "session.list": list_sessions,
        "gc": gc,
    }
    """The requests the supervisor answers itself."""

    def _rekey(self, worker: Worker, session_id: str) -> None:
        """After a fork the worker goes on in the new session; the old one reopens in a fresh worker when asked."""
        if self.workers.get(worker.session_id) is worker:
            del self.workers[worker.session_id]
        worker.session_id = session_id
        self.workers[session_id] = worker
        log.info("worker %d now serves the fork %s", worker.process.pid, session_id)

    def status(self) -> DaemonStatus:
        """What `daemon status` shows."""
        return DaemonStatus(
            running=True,
            pid=os.getpid(),
            socket=str(self.socket_path),
            version=PROTOCOL_VERSION,
            uptime_s=(self.clock.now_ms() - self._started_ms) / 1000,
            workers=[
                WorkerRow(
                    session=w.session_id,
                    pid=w.process.pid,
                    cwd=w.cwd,
                    socket=str(w.socket),
                    restarts=self.restarts.get(w.session_id, 0),
                )
                for w in self.workers.values()
            ],
            reports=self.reports[-REPORTS_KEPT:],
            fork_server=self.fork_server.pid if self.fork_server is not None else None,
            culled=self.upkeep.culled[-REPORTS_KEPT:],
            last_gc=self.upkeep.last_gc,
        )

    async def create_session(self, args: CreateArgs) -> SessionCreated:
        """Create a session in an explicit, existing, absolute working dir, hosted by a new worker."""
        cwd = check_working_dir(args.cwd, absolute=True, field="args.cwd")
        creation = (
            None
            if args.sandbox is None and args.policy is None
            else encode(SandboxCreation(sandbox=args.sandbox, policy=args.policy))
        )
        worker = await self._spawn(None, str(cwd), creation=creation)
        return SessionCreated(
            id=worker.session_id, cwd=worker.cwd, pid=worker.process.pid, notices=list(worker.notices)
        )

    async def ensure_worker(self, session_id: str) -> Worker:
        """The session's live worker, starting one (reopening the session) if none runs."""
        async with self._locks.setdefault(session_id, asyncio.Lock()):
            return await self._live_worker(session_id)

    async def _live_worker(self, session_id: str) -> Worker:
        """Under the session's lock: its live worker, or a new one reopening it."""
        worker = self.workers.get(session_id)
        if worker is not None and worker.process.returncode is None and not worker.closing:
            return worker
        if worker is not None and worker.process.returncode is None:  # stopping: the session is not open twice
            await worker.process.wait()
        return await self._spawn(session_id, dirs.saved_header(sessions_root(), session_id).cwd)

    def _worker_socket(self) -> Path:
        """A fresh worker socket path beside the daemon's (short: AF_UNIX paths stop at 107 bytes)."""
        self._spawned += 1
        return self.socket_path.parent / f"w-{os.getpid()}-{self._spawned}.sock"

    def _remove_stale_worker_sockets(self) -> None:
        """Worker sockets a crashed daemon left (no listener behind them) are removed at start."""
        for path in self.socket_path.parent.glob("w-*.sock"):
            if not socket_is_live(path):
                with contextlib.suppress(OSError):
                    os.unlink(path)

    async def _spawn(self, session_id: str | None, cwd: str, *, creation: bytes | None = None) -> Worker:
        """Start a worker in `cwd` for `session_id` (None: create a new session, with the sandbox `creation` asks
        for) and wait for its ready line."""
        if self._stopping:
            raise RequestError("daemon_stopping", "the daemon is stopping")
        check_working_dir(cwd)  # gone at a restart: the restart fails with the spec's text
        self._spawned_keys += 1
        key = session_id or f"new-{os.getpid()}-{self._spawned_keys}"
        sock = self._worker_socket()
        # Under the spawn lock from fork to registration: an orphan sweep never sees an unregistered worker.
        async with self._spawn_lock:
            process = await self._start_process(session_id, cwd, sock, creation)
            now = self.clock.now_ms()
            placeholder = Worker(session_id or key, cwd, sock, process, now, now)
            self.workers[placeholder.session_id] = placeholder
        try:
            line = await bounded(self.clock, process.ready_line(), WORKER_READY_TIMEOUT_MS)
            ready = (
                decode_json(line, WorkerReady, code="malformed", what="a worker's ready line")
                if line.strip()
                else WorkerReady(ready=False, error="worker_start_failed", message="the worker exited at start")
            )
        except TimeoutError:  # e.g. it waits for the session another process holds, or a machine under load
            why = f"no ready line within {WORKER_READY_TIMEOUT_MS // 1000} s"
            ready = WorkerReady(ready=False, error="worker_start_failed", message=f"worker did not start: {why}")
        except EukheError as error:
            ready = WorkerReady(ready=False, error="worker_start_failed", message=f"worker did not start: {error}")
        except BaseException:  # cancelled (the daemon stops, the client left): no worker is left unregistered
            process.kill()
            await process.wait()
            process.close_stdin()
            raise
        finally:
            if self.workers.get(placeholder.session_id) is placeholder:
                del self.workers[placeholder.session_id]
        if not ready.ready or ready.session is None:
            process.kill()
            await process.wait()
            process.close_stdin()  # its pipe goes with it (a worker that never served leaks no fd)
            code = ready.error if ready.error in CATALOGUE else "worker_start_failed"
            raise WorkerStartError(code or "worker_start_failed", str(ready.message))
        worker = Worker(ready.session, cwd, sock, process, placeholder.started_ms, self.clock.now_ms())
        worker.notices = list(ready.notices)
        self.workers[worker.session_id] = worker
        monitor = asyncio.create_task(self._monitor(worker))
        self._monitors.add(monitor)
        monitor.add_done_callback(self._monitors.discard)
        log.info("worker %d serves session %s in %s", process.pid, worker.session_id, cwd)
        return worker

    async def _start_process(
        self, session_id: str | None, cwd: str, sock: Path, creation: bytes | None = None
    ) -> WorkerProcess:
        """A worker process for `session_id` (None: a new session) in `cwd`: forked by the warm fork server, or a
        fresh Python when there is none (EUKHE_WORKER_START=exec) or it fails. `creation` (the sandbox a new
        session asks for) goes in its environment."""
        env = None if creation is None else {CREATION_ENV: creation.decode()}
        server = await self._ready_fork_server()
        if server is not None:
            try:
                return await server.fork(session_id, cwd, sock, self.socket_path, env=env)
            except ForkServerError as error:
                log.warning("%s; this worker starts as a fresh Python", error)
        args = ["--socket", str(sock), "--daemon", str(self.socket_path)]
        args += ["--session", session_id] if session_id else ["--create"]
        return await ExecWorker.start(args, cwd, env=env)

    async def _ready_fork_server(self) -> ForkServer | None:
        """The running fork server, started (again) if it is not running; None when there is none to use."""
        server = self.fork_server
        if server is None:
            return None
        start = self._fork_start
        if start is None or (start.done() and not server.running):
            failed = self._fork_failed_at_ms
            if failed is not None and self.clock.now_ms() - failed < FORK_RETRY_MS:
                return None
            start = self._fork_start = asyncio.create_task(server.start(self.socket_path))
        try:
            await asyncio.shield(start)
        except ForkServerError as error:
            self._fork_failed_at_ms = self.clock.now_ms()
            self._fork_start = None
            log.warning("%s; workers start as fresh Pythons for %d s", error, FORK_RETRY_MS // 1000)
            return None
        return server if server.running else None

    def _kept_pids(self) -> set[int]:
        """The supervisor's children an orphan sweep leaves alone: the live workers and the fork server."""
        kept = {w.process.pid for w in self.workers.values()}
        if self.fork_server is not None and self.fork_server.pid is not None:
            kept.add(self.fork_server.pid)
        return kept

    async def _monitor(self, worker: Worker) -> None:
        """Wait for a worker's end; if it was not asked to stop, report it, end its orphans and reopen the session."""
        code = await worker.process.wait()
        worker.close_idle()
        worker.process.close_stdin()  # its pipe's end: a worker that died (kill -9) was never stopped (a leaked fd)
        if self.workers.get(worker.session_id) is worker:
            del self.workers[worker.session_id]
        if self._stopping:
            return  # the daemon's stop ends every orphan once all workers are gone
        if worker.closing:  # asked to stop: not reopened; what its jobs left (a close that failed midway) ends
            async with self._spawn_lock:
                await end_orphans(self._kept_pids())
            return
        how = f"killed by signal {-code}" if code < 0 else f"exited with {code}"
        log.warning("worker %d of session %s %s", worker.process.pid, worker.session_id, how)
        async with self._spawn_lock:
            ended = await end_orphans(self._kept_pids())
        report = WorkerReport(
            event="worker_died",
            session=worker.session_id,
            pid=worker.process.pid,
            exit=code,
            orphans_ended=ended,
            at=time.time(),
        )
        self.restarts[worker.session_id] = self.restarts.get(worker.session_id, 0) + 1
        if not self.crash_loops.reopen_after_death(worker.session_id, worker.started_ms):
            log.error(
                "session %s: worker died %d times in a row within %d ms of its start; not reopened until asked",
                worker.session_id,
                CRASH_LOOP_LIMIT,
                CRASH_LOOP_MS,
            )
            self._report(msgspec.structs.replace(report, reopen_error="crash loop: reopened on the next request only"))
            return
        try:
            fresh = await self.ensure_worker(worker.session_id)
            report = msgspec.structs.replace(report, reopened=ReopenedWorker(pid=fresh.process.pid))
        except (EukheError, OSError) as error:  # OSError: e.g. out of fds (EMFILE) for the new worker's pipes
            log.error("session %s not reopened: %s", worker.session_id, error)
            report = msgspec.structs.replace(report, reopen_error=str(error))
        self._report(report)

    def _report(self, report: WorkerReport) -> None:
        """Keep a report for `status` (the last REPORTS_KEPT)."""
        self.reports.append(report)
        del self.reports[:-REPORTS_KEPT]

    async def ask_worker(
        self, worker: Worker, op: str, args: Record, answer: type[A], request_id: int | str = "supervisor"
    ) -> A:
        """The supervisor's own question to a worker (no client's events): its answer as the record `answer`."""
        assert OPS[op].answer is answer, f"{op} answers {OPS[op].answer}"
        result: A = await self.forward(worker, Request(id=request_id, op=op, args=args), NO_EVENTS, answer)
        return result

    async def forward(self, worker: Worker, request: Request, emit: EventSink, answer: type[A] | None = None) -> Any:
        """Send one request to a worker and relay its events and reply (its result as the record `answer` when
        given; an error reply raises DaemonError with the worker's code), on a connection kept from an earlier
        request or a new one; kept for the next once answered (not one a cancel or a stream used)."""
        connection = worker.take_connection()
        kept = connection is not None
        if connection is None:
            try:
                connection = await asyncio.open_unix_connection(str(worker.socket), limit=MAX_REPLY_BYTES)
            except OSError as error:
                shortage = resource_shortage(error)
                if shortage is not None:  # out of fds here: the worker is fine, and waiting for its end would not help
                    raise shortage from error
                raise WorkerUnreachableError(
                    "worker_unavailable", f"session {worker.session_id}: {error.strerror}"
                ) from error
        reader, writer = connection
        answered = False
        try:
            try:
                writer.write(encode_request(request.id, request.op, to_builtins(request.args)))
                await writer.drain()
            except (ConnectionError, OSError) as error:
                what = f"session {worker.session_id}: {error.strerror or error}"
                if kept:  # it died since the last request; nothing of this one was read: sent again once reopened
                    raise WorkerUnreachableError("worker_unavailable", what) from error
                raise RequestError("worker_died", what) from error
            cancelled = False
            heard = 0
            cancel_id = f"cancel-{request.id}"
            while True:
                try:
                    line = await reader.readline()
                except ConnectionResetError as error:
                    if reset_means_never_read(heard, cancelled):  # nothing of it ran: sent again once reopened
                        what = f"session {worker.session_id}: its worker ended before it read the request"
                        raise WorkerUnreachableError("worker_unavailable", what) from error
                    raise _ended_mid_request(worker) from error
                except ConnectionError as error:
                    raise _ended_mid_request(worker) from error
                except asyncio.CancelledError:
                    if cancelled or self._stopping:
                        raise
                    # The client cancelled (Ctrl-C): the worker cancels the call through its job's owner; its answer
                    # (how the job ended) is still relayed.
                    cancelled = True
                    writer.write(encode_request(cancel_id, "cancel", {"request": request.id}))
                    await writer.drain()
                    continue
                if not line:
                    raise _ended_mid_request(worker)
                heard += 1
                try:
                    kind, value = reply_outcome(decode_reply(line), request.id, skip=cancel_id, answer=answer)
                except DaemonError:
                    answered = not cancelled and request.op not in STREAMING_OPS
                    raise
                if kind == EVENT:
                    emit(value)
                    await emit.drain()
                elif kind == RESULT:
                    answered = not cancelled and request.op not in STREAMING_OPS
                    return value
        finally:
            current = self.workers.get(worker.session_id) is worker and not worker.closing
            if answered and current and not self._stopping and len(worker.idle) < IDLE_CONNECTIONS:
                worker.idle.append(connection)
            else:
                await close_writer(writer)


class CrashLoops:
    """The crash-loop guard: a session whose worker died CRASH_LOOP_LIMIT times in a row, each within CRASH_LOOP_MS
    of its start (on `clock`), is not reopened eagerly; a worker that lived longer starts the count again."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._quick_deaths: dict[str, int] = {}

    def reopen_after_death(self, session_id: str, started_ms: int) -> bool:
        """A worker of `session_id` started at `started_ms` died now: whether its session is reopened at once."""
        quick = self.clock.now_ms() - started_ms < CRASH_LOOP_MS
        deaths = self._quick_deaths.get(session_id, 0) + 1 if quick else 0
        self._quick_deaths[session_id] = deaths
        return deaths < CRASH_LOOP_LIMIT

    def forget(self, session_id: str) -> None:
        """The session was deleted: its count goes."""
        self._quick_deaths.pop(session_id, None)


def _ended_mid_request(worker: Worker) -> RequestError:
    return RequestError("worker_died", f"the worker of session {worker.session_id} ended mid-request")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the daemon process (`eukhe daemon run` runs it in the foreground)."""
    parser = argparse.ArgumentParser(prog="eukhe-daemon")
    parser.add_argument("--socket")
    args = parser.parse_args(argv)
    path = Path(os.path.abspath(args.socket)) if args.socket else default_socket_path()
    return run_supervisor(path)


def run_supervisor(path: Path) -> int:
    """Run a supervisor on `path` in this process until it stops; errors are logged and give exit code 1. eukhe's
    own secrets leave its environment first: its workers, their jobs and kernels inherit it."""
    for name in OWN_SECRETS:
        os.environ.pop(name, None)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s daemon[%(process)d] %(levelname)s %(message)s")
    try:
        return asyncio.run(Supervisor(path).run())
    except DaemonRunningError as error:
        log.info("%s", error)
        return EXIT_ANOTHER_DAEMON
    except EukheError as error:
        log.error("%s", error)
        sys.stderr.write(f"eukhe daemon: {error}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
