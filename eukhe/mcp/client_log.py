"""MCP logging: the server's own diagnostics (what it writes on stderr) also go to a client that asked for them with
`logging/setLevel`, as `notifications/message` at or above its level (`eukhe.core.mcp_log` decides).

One `ClientLog` per MCP connection (stdio's one, each HTTP connection's): its server registers `set_level` as the
`logging/setLevel` handler (which makes the SDK declare the `logging` capability), runs `lifespan` for as long as the
connection lives, and wraps every request in `scope`. A diagnostic logged while a request of a connection is handled
(in its task or one it started: a call's cancel, a failed progress report) goes to that connection only; one logged
outside every request (a connection opened or ended, a refused request, the stop) goes to every connection that
set a level. The records come from one handler on the root logger, from any thread; each connection's records wait
in a bounded queue (past it they are dropped: stderr has them all) and one task sends them, in order, on the
connection's own channel (the GET stream over HTTP), outside every request, so that nothing it logs comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession

from eukhe.core.mcp_log import Level, level_of, wanted

QUEUE = 256
"""Diagnostics waiting for a connection's sender; more are dropped (they are on stderr)."""

Context = ServerRequestContext[Any, Any]


@dataclass(frozen=True, slots=True)
class Entry:
    """One diagnostic, as its notification carries it."""

    level: Level
    logger: str
    data: str


SCOPE: contextvars.ContextVar[ClientLog | None] = contextvars.ContextVar("eukhe_mcp_client_log", default=None)
"""The connection whose request is being handled here (None: outside every request)."""

SENDING: contextvars.ContextVar[bool] = contextvars.ContextVar("eukhe_mcp_client_log_sending", default=False)
"""True in a sender's task: what sending logs is not sent again."""

LIVE: set[ClientLog] = set()
"""The connections that serve now."""


class ClientLog:
    """One connection's diagnostics for its client, from the level it set on."""

    def __init__(self) -> None:
        self.threshold: Level | None = None
        self.session: ServerSession | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.queue: MemoryObjectSendStream[Entry] | None = None

    def serve(self, server: Server[Any]) -> None:
        """Make `server` serve MCP logging with this log: its `logging/setLevel` handler and its request scope (its
        lifespan is `lifespan`, given to its constructor)."""
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self.set_level)
        server.middleware.append(self.scope)

    async def set_level(self, ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """`logging/setLevel`: from now on this connection's client gets the diagnostics at or above `level`."""
        self.threshold = params.level
        self.session = ctx.session
        return types.EmptyResult()

    async def scope(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        """Every request of this connection runs with this log as its scope."""
        token = SCOPE.set(self)
        try:
            return await call_next(ctx)
        finally:
            SCOPE.reset(token)

    @contextlib.asynccontextmanager
    async def lifespan(self, server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        """While the connection lives: its diagnostics are queued and sent."""
        install()
        queue, waiting = anyio.create_memory_object_stream[Entry](QUEUE)
        self.loop, self.queue = asyncio.get_running_loop(), queue
        LIVE.add(self)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self.send_all, waiting)
                try:
                    yield {}
                finally:
                    group.cancel_scope.cancel()
        finally:
            LIVE.discard(self)
            queue.close()

    def offer(self, entry: Entry) -> None:
        """Queue a diagnostic for this client if it wants it (from any thread)."""
        loop, queue = self.loop, self.queue
        if loop is None or queue is None or not wanted(entry.level, self.threshold):
            return

        def put() -> None:
            with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                queue.send_nowait(entry)

        with contextlib.suppress(RuntimeError):  # the loop closed: the connection is gone
            loop.call_soon_threadsafe(put)

    async def send_all(self, waiting: MemoryObjectReceiveStream[Entry]) -> None:
        """Send the queued diagnostics in order, each one the client still wants, on the connection's channel."""
        SENDING.set(True)
        async with waiting:
            async for entry in waiting:
                session = self.session
                if session is None or not wanted(entry.level, self.threshold):
                    continue
                params = types.LoggingMessageNotificationParams(level=entry.level, logger=entry.logger, data=entry.data)
                try:
                    await session.send_notification(types.LoggingMessageNotification(params=params))
                except Exception as error:  # a diagnostic that cannot be sent never ends the connection
                    logging.getLogger("eukhe.mcp").debug("a diagnostic was not sent: %r", error)


class Diagnostics(logging.Handler):
    """The root logger's handler that hands each diagnostic to the connections it belongs to."""

    def emit(self, record: logging.LogRecord) -> None:
        scoped = SCOPE.get()
        level = level_of(record.levelno)
        wanting = [log for log in ([scoped] if scoped is not None else list(LIVE)) if wanted(level, log.threshold)]
        if not wanting or SENDING.get():
            return
        try:
            entry = Entry(level, record.name, record.getMessage())
        except Exception:  # a record whose message cannot be made: stderr's handler says so
            return
        for log in wanting:
            log.offer(entry)


HANDLER = Diagnostics()


def install() -> None:
    """Put the handler on the root logger, once (it sees what stderr's handler sees)."""
    root = logging.getLogger()
    if HANDLER not in root.handlers:
        root.addHandler(HANDLER)
