"""The MCP server's side of the daemon: asyncio connections that speak the CLI's protocol (docs/daemon-protocol.md).

Why asyncio streams and not the CLI's blocking `DaemonClient` in a thread: a tool call must be cancellable while it
waits (the client's `notifications/cancelled`), and the daemon answers one request at a time per connection. So
each call has a connection to itself while it runs (twenty concurrent tool calls are twenty connections; the
supervisor forwards each to the session's worker), and a cancelled call sends the connection-level `cancel` op for
its request on that same connection, then reads on until the daemon's answer says how the job ended (bounded,
shielded from the cancellation that asked for it). A connection whose request was answered goes back to a small
pool of idle ones for the next call (a connect and the supervisor's peer check cost about as much as a bash run's
bookkeeping: bench/mcp_roundtrip.py); one that was cancelled, broke or that the daemon closed is not reused.

Tool calls (`tool.call`) go to the session's worker directly, past the supervisor (two hops and a relay fewer per
call): the worker's socket comes from `session.ping`, asked of the supervisor, which starts or reopens the worker
first. A call the worker never took (its socket is gone, it is retiring after idle culling, it serves another session
since a fork) goes through the supervisor instead, which reopens the session, and the next call asks for the route
again. A direct connection closed mid-call is `worker_died`, as the supervisor would say.

Requests are encoded by `eukhe.daemon.wire` and replies read by `eukhe.daemon.replies`, as the CLI's are.
When no daemon answers, one is started as every CLI command starts it (`eukhe.daemon.client.connect`, in a thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from eukhe.core.delivery import reset_means_never_read
from eukhe.daemon.client import DaemonUnavailableError, bounded_request, connect
from eukhe.daemon.replies import EVENT, RESULT, DaemonError, DaemonProtocolError, decode_reply, reply_outcome
from eukhe.daemon.wire import MAX_REPLY_BYTES, encode_request
from eukhe.errors import EukheError, RequestTooLargeError

log = logging.getLogger("eukhe.mcp")

IDLE_KEPT = 8
"""Idle connections kept for later calls; more concurrent calls open more, and close them when done."""
CANCEL_WAIT_S = 30.0
"""After sending a cancel, how long a call waits for the daemon's answer (the job's end) before it lets go. The
daemon kills a bash job's group at once and a cell's kernel after its grace, so this is rarely reached; past it the
cancel still goes on in the daemon."""

EventHandler = Callable[[Any], None]

CALL_OP = "tool.call"
"""Every tool call is this one daemon op: the session journals it (start, settle) and runs the tool."""
DIRECT_OPS = frozenset({CALL_OP})
"""The requests sent to the session's worker itself."""
NOT_TAKEN = frozenset({"worker_retiring", "wrong_session"})
"""A worker's refusals of a request it did not start: sent through the supervisor instead."""


class WorkerDiedError(EukheError):
    """The worker closed a direct connection before it answered the call."""

    code = "worker_died"


class NotSentError(ConnectionError):
    """The request never reached the peer: the connection broke at the send, or its end shows it was never read
    (`core.delivery.reset_means_never_read`)."""


class DaemonConnection:
    """One connection to the supervisor; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._lines_read = 0

    async def request(
        self,
        op: str,
        args: dict[str, Any],
        *,
        on_event: EventHandler | None = None,
        cancel_in_daemon: Callable[[], bool] | None = None,
        what: str | None = None,
    ) -> Any:
        """Send one request and return its result; its events go to `on_event`; an error reply raises DaemonError.
        `what` names the request in diagnostics (default: its op).

        Cancelled while it waits, it asks `cancel_in_daemon()` whether the daemon should cancel the request too
        (the client cancelled the call; not when the server shuts down, whose calls go on in the daemon). If so it
        sends the `cancel` op and waits for the request's answer, at most CANCEL_WAIT_S, before the cancellation
        goes on."""
        request_id = next(self._ids)
        line = bounded_request(request_id, op, args, what)  # too large: refused here, the connection untouched
        try:
            await self._send(line)
        except OSError as error:
            raise NotSentError(error.errno, error.strerror or str(error)) from error
        lines_before = self._lines_read
        try:
            return await self._answer(request_id, on_event)
        except ConnectionResetError as error:
            if reset_means_never_read(self._lines_read - lines_before, cancel_sent=False):
                raise NotSentError(error.errno, "the peer ended before it read the request") from error
            raise
        except anyio.get_cancelled_exc_class():
            if cancel_in_daemon is None or not cancel_in_daemon():
                raise
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WAIT_S) as waited:
                await self._cancel(what or op, request_id, on_event)
            if waited.cancelled_caught:
                log.warning(
                    "%s: no answer to its cancel within %.0f s; the daemon goes on with it", what or op, CANCEL_WAIT_S
                )
            raise

    async def _cancel(self, op: str, request_id: int, on_event: EventHandler | None) -> None:
        """Cancel the request in flight and read on until its answer (which says how its job ended)."""
        cancel_id = f"cancel-{request_id}"
        try:
            await self._send(encode_request(cancel_id, "cancel", {"request": request_id}))
            await self._answer(request_id, on_event, skip=cancel_id)
            log.info("%s: cancelled by the client (it ended before the daemon saw the cancel)", op)
        except DaemonError as error:
            log.info("%s: cancelled by the client: %s", op, error)
        except (DaemonProtocolError, OSError) as error:
            log.warning("%s: cancelled by the client; the daemon's answer did not come: %s", op, error)

    async def _send(self, line: bytes) -> None:
        self._writer.write(line)
        await self._writer.drain()

    async def _answer(self, request_id: int, on_event: EventHandler | None, skip: str | None = None) -> Any:
        """Read replies until the one for `request_id`, relaying its events (a reply for `skip` is passed over)."""
        while True:
            kind, value = reply_outcome(await self._reply(), request_id, skip)
            if kind == RESULT:
                return value
            if kind == EVENT and on_event is not None:
                on_event(value)

    async def _reply(self) -> dict[str, Any]:
        try:
            line = await self._reader.readline()
        except ValueError as error:  # asyncio's own words for a line past the limit
            raise DaemonProtocolError(f"a reply line is longer than {MAX_REPLY_BYTES} bytes") from error
        if not line.endswith(b"\n"):
            raise DaemonProtocolError("the daemon closed the connection")
        self._lines_read += 1
        return decode_reply(line)

    @property
    def reusable(self) -> bool:
        """Still open at both ends, with nothing unread (the daemon did not close it while it was idle)."""
        return not (self._reader.at_eof() or self._writer.is_closing())

    async def close(self) -> None:
        """Close the connection (a request still in flight goes on in the daemon, to its own end)."""
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()


class _Pool:
    """Idle connections to one socket, kept for the next request."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.idle: list[DaemonConnection] = []

    async def take(self) -> DaemonConnection:
        """An idle connection that is still good, else a new one."""
        while self.idle:
            connection = self.idle.pop()
            if connection.reusable:
                return connection
            await connection.close()
        return await self.open()

    async def open(self) -> DaemonConnection:
        """A new connection to the socket."""
        reader, writer = await asyncio.open_unix_connection(self.socket, limit=MAX_REPLY_BYTES + 1)
        return DaemonConnection(reader, writer)

    async def give_back(self, connection: DaemonConnection, answered: bool) -> None:
        """Keep an answered connection for the next request (up to IDLE_KEPT); close any other."""
        if answered and connection.reusable and len(self.idle) < IDLE_KEPT:
            self.idle.append(connection)
        else:
            with anyio.CancelScope(shield=True):
                await connection.close()

    async def aclose(self) -> None:
        idle, self.idle = self.idle, []
        for connection in idle:
            await connection.close()


class DaemonLink:
    """Where the daemon listens; opens a connection per call, starting the daemon first when none answers; a tool
    call goes to its session's worker."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self._supervisor = _Pool(socket)
        self._workers: dict[str, _Pool] = {}
        """Each session's route: its worker's socket, and the connections kept to it."""

    async def connect(self) -> DaemonConnection:
        """A fresh connection to the supervisor."""
        try:
            return await self._open()
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.ECONNREFUSED):
                raise DaemonUnavailableError(f"cannot reach the daemon at {self.socket}: {error.strerror}") from error
        log.info("no daemon answers at %s: starting one", self.socket)
        await anyio.to_thread.run_sync(self._start)
        try:
            return await self._open()
        except OSError as error:
            raise DaemonUnavailableError(f"cannot reach the daemon at {self.socket}: {error.strerror}") from error

    async def _open(self) -> DaemonConnection:
        return await self._supervisor.open()

    def _start(self) -> None:
        """Start the daemon (blocking) the way every CLI command does, and wait until it answers."""
        connect(self.socket).close()

    async def call(
        self,
        op: str,
        args: dict[str, Any],
        *,
        on_event: EventHandler | None = None,
        cancel_in_daemon: Callable[[], bool] | None = None,
        what: str | None = None,
    ) -> Any:
        """One request on a connection of its own while it runs (see DaemonConnection.request); an answered
        connection goes back to the pool. A tool call goes to its session's worker when it can (the module's
        docstring)."""
        session = args.get("session")
        if op in DIRECT_OPS and isinstance(session, str):
            pool = await self._route(session)
            if pool is not None:
                try:
                    return await self._request(
                        pool, op, args, on_event=on_event, cancel_in_daemon=cancel_in_daemon, what=what, direct=True
                    )
                except NotTakenError:
                    await self._forget(session, pool)
        return await self._request(
            self._supervisor, op, args, on_event=on_event, cancel_in_daemon=cancel_in_daemon, what=what
        )

    async def _request(
        self,
        pool: _Pool,
        op: str,
        args: dict[str, Any],
        *,
        on_event: EventHandler | None = None,
        cancel_in_daemon: Callable[[], bool] | None = None,
        what: str | None = None,
        direct: bool = False,
    ) -> Any:
        """The request on a connection of `pool`; direct (to a worker): NotTakenError if the worker did not take it."""
        try:
            connection = await pool.take()
        except OSError:
            if direct:
                raise NotTakenError() from None
            connection = await self.connect()
        answered = False
        try:
            result = await connection.request(op, args, on_event=on_event, cancel_in_daemon=cancel_in_daemon, what=what)
            answered = True
            return result
        except RequestTooLargeError:
            answered = True  # refused before it was sent: the connection is in step
            raise
        except DaemonError as error:
            answered = True  # an error reply is an answer: the connection is in step
            if direct and error.code in NOT_TAKEN:
                raise NotTakenError() from error
            raise
        except NotSentError as error:
            if direct:
                raise NotTakenError() from error
            raise
        except DaemonProtocolError as error:
            if direct:
                raise WorkerDiedError(f"{what or op}: the session's worker ended before it answered") from error
            raise
        finally:
            await pool.give_back(connection, answered)

    async def _route(self, session: str) -> _Pool | None:
        """The session's worker (its socket asked of the supervisor the first time), or None when it gives none."""
        pool = self._workers.get(session)
        if pool is None:
            try:
                pong = await self._request(self._supervisor, "session.ping", {"session": session})
            except (EukheError, OSError) as error:
                log.info("session %s: no direct route to its worker (%s); calls go through the daemon", session, error)
                return None
            socket = pong.get("socket") if isinstance(pong, dict) else None
            if not isinstance(socket, str):
                return None
            pool = self._workers[session] = _Pool(socket)
        return pool

    async def _forget(self, session: str, pool: _Pool) -> None:
        """The worker did not take a call: the next one asks for the route again."""
        if self._workers.get(session) is pool:
            del self._workers[session]
        await pool.aclose()

    async def aclose(self) -> None:
        """Close the idle connections."""
        await self._supervisor.aclose()
        workers, self._workers = list(self._workers.values()), {}
        for pool in workers:
            await pool.aclose()


class NotTakenError(Exception):
    """A direct request the worker did not start: it goes through the supervisor."""
