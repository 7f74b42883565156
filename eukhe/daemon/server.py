"""One connection's request loop, shared by the supervisor and the workers (docs/daemon-protocol.md).

Reads bytes, cuts lines with the sans-I/O splitter, answers each line with exactly one reply in order: a fault
(oversized, malformed, unsupported version) gets an error reply and the loop goes on; a request goes to the handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from eukhe.daemon.protocol import (
    JSON,
    LineSplitter,
    Oversized,
    ProtocolFault,
    Request,
    encode_error,
    encode_event,
    encode_result,
    oversized_fault,
    parse_request,
)
from eukhe.errors import EukheError, error_code

log = logging.getLogger("eukhe.daemon")

STREAMING_OPS = frozenset({"watch"})
"""Requests that stream events until the client leaves: they end when the client closes or sends anything."""

EventSink = Callable[[JSON], Awaitable[None]]
RequestHandler = Callable[[Request, EventSink], Awaitable[JSON]]


class RequestError(EukheError):
    """A request the daemon understood but refuses (unknown op, bad arguments, no such session...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def arg_str(request: Request, name: str, *, optional: bool = False) -> str | None:
    """A string argument, or RequestError `bad_args`."""
    value = request.args.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise RequestError("bad_args", f"{request.op}: `{name}` must be a string")
    return value


def arg_int(request: Request, name: str, *, optional: bool = False) -> int | None:
    """A non-negative integer argument, or RequestError `bad_args`."""
    value = request.args.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RequestError("bad_args", f"{request.op}: `{name}` must be a non-negative integer")
    return value


async def serve_requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handle: RequestHandler) -> None:
    """Answer every line on the connection until the peer closes it."""
    splitter = LineSplitter()
    write_lock = asyncio.Lock()

    async def send(line: bytes) -> None:
        async with write_lock:
            writer.write(line)
            await writer.drain()

    while True:
        try:
            data = await reader.read(1 << 16)
        except (ConnectionError, OSError):
            return
        if not data:
            return
        for item in splitter.feed(data):
            parsed = oversized_fault(item) if isinstance(item, Oversized) else parse_request(item)
            try:
                if isinstance(parsed, ProtocolFault):
                    await send(encode_error(parsed.id, parsed.code, parsed.message))
                    continue
                if parsed.op in STREAMING_OPS:
                    await _stream(parsed, reader, handle, send)
                    return
                await send(await _answer(parsed, handle, send))
            except (ConnectionError, OSError):
                return


async def _stream(
    request: Request, reader: asyncio.StreamReader, handle: RequestHandler, send: Callable[[bytes], Awaitable[None]]
) -> None:
    """Run a streaming request until it ends or the client closes (or sends anything); then the connection ends."""
    answer = asyncio.create_task(_answer(request, handle, send))
    gone = asyncio.create_task(reader.read(1))
    try:
        await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
        if answer.done():
            await send(answer.result())
    finally:
        for task in (answer, gone):
            task.cancel()
        await asyncio.gather(answer, gone, return_exceptions=True)


async def _answer(request: Request, handle: RequestHandler, send: Callable[[bytes], Awaitable[None]]) -> bytes:
    """Run one request's handler and make its one reply."""

    async def emit(event: JSON) -> None:
        await send(encode_event(request.id, event))

    try:
        return encode_result(request.id, await handle(request, emit))
    except EukheError as error:
        return encode_error(request.id, error_code(error), str(error))
    except (ConnectionError, BrokenPipeError):
        raise
    except Exception as error:
        log.exception("request %s (%s) failed", request.id, request.op)
        return encode_error(request.id, "internal", f"{type(error).__name__}: {error}")


async def close_writer(writer: asyncio.StreamWriter) -> None:
    """Close a stream writer and wait for it, ignoring a peer that is already gone."""
    writer.close()
    with contextlib.suppress(OSError, ConnectionError):
        await writer.wait_closed()
