"""One connection's request loop, shared by the supervisor and the workers (docs/daemon-protocol.md).

Reads bytes, cuts lines with the one line splitter, answers each line with exactly one reply, in order: a fault
(oversized, malformed, unknown op, bad arguments) gets an error reply naming the field and the loop goes on; a
request goes to the handler. While a request runs the connection is still read: a `cancel` naming it cancels it
(its handler kills its job through the owner and answers `cancelled`); other lines wait their turn. A streaming
request (`watch`) ends when the client sends anything (it then gets its reply, and that line is answered next) or
closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from eukhe.daemon.protocol import (
    JSON,
    ProtocolFault,
    Request,
    encode_error,
    encode_event,
    encode_result,
    parse_request,
    request_splitter,
)
from eukhe.errors import CodedError, EukheError, error_code, error_details, error_field, resource_shortage
from eukhe.records.daemon import OPS, CancelAccepted, CancelArgs, WatchEnded

log = logging.getLogger("eukhe.daemon")

STREAMING_OPS = frozenset({"watch", "jobs.attach"})
"""Requests that stream events until the client leaves: they end when the client closes or sends anything."""


class EventSink:
    """Sends the events of the request in flight: `sink(event)` writes one now (events go out in the order they are
    made, before the reply); `await sink.drain()` waits while the client is slow to read (a stream's backpressure)."""

    def __init__(self, writer: asyncio.StreamWriter, request_id: int | str) -> None:
        self._writer = writer
        self._id = request_id

    def __call__(self, event: JSON) -> None:
        self._writer.write(encode_event(self._id, event))

    async def drain(self) -> None:
        await self._writer.drain()


class _NoEvents(EventSink):
    """The sink of a request the daemon makes itself (it has no client to send events to): events are dropped."""

    def __init__(self) -> None:
        pass

    def __call__(self, event: JSON) -> None:
        pass

    async def drain(self) -> None:
        pass


NO_EVENTS: EventSink = _NoEvents()

RequestHandler = Callable[[Request, EventSink], Awaitable[JSON]]
Item = Request | ProtocolFault | None  # None: the client closed its end


class RequestError(CodedError):
    """A request the daemon understood but refuses (unknown session, daemon stopping...): a catalogue code."""


async def serve_requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handle: RequestHandler) -> None:
    """Answer every line on the connection until the peer closes it."""
    await _Connection(reader, writer, handle).serve()


class _Connection:
    """One client connection: its parsed lines (read on while a request runs), the lines waiting their turn, and
    its replies, written one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handle: RequestHandler) -> None:
        self.reader = reader
        self.writer = writer
        self.handle = handle
        self.items: asyncio.Queue[Item] = asyncio.Queue()
        self.backlog: deque[Item] = deque()
        self.lock = asyncio.Lock()

    async def send(self, line: bytes) -> None:
        async with self.lock:
            self.writer.write(line)
            await self.writer.drain()

    async def serve(self) -> None:
        reading = asyncio.create_task(self._read_items())
        try:
            while True:
                item = self.backlog.popleft() if self.backlog else await self.items.get()
                if item is None:
                    return
                if isinstance(item, ProtocolFault):
                    await self.send(encode_error(item.id, item.code, item.message, item.field))
                    continue
                if item.op == "cancel":
                    target = item.args.request if isinstance(item.args, CancelArgs) else None
                    message = f"no request {target!r} is in flight on this connection"
                    await self.send(encode_error(item.id, "bad_args", message, "args.request"))
                    continue
                if not await self._run_one(item):
                    return
        except (ConnectionError, OSError):
            return
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading

    async def _read_items(self) -> None:
        """Read the connection into parsed items; None at its end."""
        splitter = request_splitter()
        try:
            while data := await self.reader.read(1 << 16):
                for piece in splitter.feed(data):
                    self.items.put_nowait(parse_request(piece))
        except (ConnectionError, OSError):
            pass
        finally:
            self.items.put_nowait(None)

    async def _run_one(self, request: Request) -> bool:
        """Run one request to its reply while reading on; False when the connection is done (it closed, or a
        stream ended)."""

        task = asyncio.create_task(_answer(request, self.handle, EventSink(self.writer, request.id)))
        streaming = request.op in STREAMING_OPS
        open_end = True
        try:
            while not task.done():
                getter = asyncio.create_task(self.items.get())
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await getter
                    continue
                following = getter.result()
                if streaming or following is None:
                    self.backlog.append(following)  # a stream ends when the client sends anything or leaves
                    open_end = following is not None
                    break
                cancels = isinstance(following, Request) and following.op == "cancel"
                if cancels and isinstance(following, Request) and following.args.request == request.id:
                    task.cancel()
                    accepted = CancelAccepted(cancelling=True, request=request.id)
                    await self.send(encode_result(following.id, accepted))
                    continue
                self.backlog.append(following)
            if streaming and not task.done():
                # The client sent a line (or left): the stream ends and still gets its one reply; that line is then
                # answered in its turn.
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                if not open_end:
                    return False
                await self.send(encode_result(request.id, WatchEnded(ended=True)))
                return True
            reply = await task
        finally:
            if not task.done():  # the connection's own task was cancelled (the daemon stops): so is the request
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if reply is not None:
            await self.send(reply)
        return open_end


async def _answer(request: Request, handle: RequestHandler, emit: EventSink) -> bytes | None:
    """Run one request's handler and make its one reply."""
    try:
        return encode_result(request.id, await handle(request, emit))
    except EukheError as error:
        return encode_error(request.id, error_code(error), str(error), error_field(error), error_details(error))
    except asyncio.CancelledError:
        if request.op in STREAMING_OPS:
            raise
        return encode_error(request.id, "cancelled", f"{request.op}: cancelled")
    except (ConnectionError, BrokenPipeError):
        raise
    except Exception as error:
        shortage = resource_shortage(error)
        if shortage is not None:  # EMFILE, ENOSPC...: the request could not be served now; it is not a bug
            log.warning("request %s (%s): %s", request.id, request.op, shortage)
            return encode_error(request.id, shortage.code, f"{request.op}: {shortage}")
        log.exception("request %s (%s) failed", request.id, request.op)
        return encode_error(request.id, "internal", f"{type(error).__name__}: {error}")


async def close_writer(writer: asyncio.StreamWriter) -> None:
    """Close a stream writer and wait for it, ignoring a peer that is already gone."""
    writer.close()
    with contextlib.suppress(OSError, ConnectionError):
        await writer.wait_closed()


__all__ = ["NO_EVENTS", "OPS", "EventSink", "RequestError", "RequestHandler", "close_writer", "serve_requests"]
