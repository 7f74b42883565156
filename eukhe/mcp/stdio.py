"""The MCP channel on stdin and stdout, read and written by the event loop itself.

The SDK's `stdio_server` reads each line and writes each message in a worker thread (`anyio.wrap_file`): three
thread hand-offs per tool call, about 0.4 ms of the round trip the benchmark measures (bench/mcp_roundtrip.py).
Here the same framing runs on the loop through asyncio pipe transports. Messages are parsed and written by the
SDK's own models (`jsonrpc_message_adapter`, `model_dump_json`), exactly as its transport does, and handed to the
SDK's server as the streams its `Server.run` takes: nothing of JSON-RPC is written here.

As with the SDK's transport, fd 0 and fd 1 are taken over: the wire gets private duplicates, fd 0 reads the null
device and fd 1 writes to stderr, so stray output (a library's print, a child that inherits them) never reaches the
channel. They stay so until the process exits (`eukhe mcp` ends when the channel does).

A line that is no message (not JSON, JSON that is no JSON-RPC message, or past MAX_LINE_BYTES) is answered here
with its JSON-RPC error (`eukhe.core.mcp_stdio` decides which), written in turn with the server's messages; the SDK's
transport would only log it, and the client would wait on that request for ever. A line past the bound is dropped
whole, however long, and the next line is read as the next message.

When stdin or stdout is not a pipe, socket or character device (a regular file, say), the loop cannot watch it, and
the SDK's own transport serves instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import stat
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from eukhe.core.mcp_stdio import Refusal, Unreadable, blank, refusal

log = logging.getLogger("eukhe.mcp")

MAX_LINE_BYTES = 64 << 20
"""Longest message line read (the daemon's own reply limit)."""

FLUSH_S = 5.0
"""At the end, how long the messages still queued may take to go out."""


def _watchable(fd: int) -> bool:
    """Whether the event loop can watch `fd` (a pipe, socket or character device)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[Any]:
    """The MCP message streams over this process's stdin and stdout, for `Server.run`: (read, write). (Typed Any:
    the SDK's fallback transport yields its own stream types.)"""
    if not (_watchable(0) and _watchable(1)):
        async with stdio_server() as streams:
            yield streams
        return
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
    )
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    refusals = outgoing.clone()  # the errors for lines that are no message, in turn with the server's messages

    async def read_lines() -> None:
        async with incoming_send, refusals:
            while (line := await read_line(reader)) is not Skipped.END:
                if line is Skipped.TOO_LONG:
                    await refusals.send(answer(refusal(Unreadable.TOO_LONG, detail=f"over {MAX_LINE_BYTES} bytes")))
                    continue
                if blank(line):
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    await refusals.send(answer(unreadable(line)))
                    continue
                await incoming_send.send(SessionMessage(message))

    written = anyio.Event()

    async def write_messages() -> None:
        try:
            async with outgoing_receive:
                async for item in outgoing_receive:
                    writer.write(item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                    await writer.drain()
        except (ConnectionError, OSError) as error:
            log.info("stdout closed: %s", error)
        finally:
            written.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read_lines)
            group.start_soon(write_messages)
            yield incoming, outgoing
            # The server is done: what it wrote goes out (bounded), then the reader stops.
            await outgoing.aclose()
            refusals.close()
            with anyio.move_on_after(FLUSH_S):
                await written.wait()
            group.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()


class Skipped(enum.Enum):
    """What `read_line` gives where there is no line to read."""

    TOO_LONG = "too_long"  # a line past MAX_LINE_BYTES, dropped whole
    END = "end"  # the input ended


async def read_line(reader: asyncio.StreamReader) -> bytes | Skipped:
    """The next line (its newline included, or the last one without), or why there is none: one past the reader's
    limit (dropped whole: every byte up to its newline, so the next line is the next message), or the end."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as end:
        return end.partial or Skipped.END
    except asyncio.LimitOverrunError as overrun:
        dropped = overrun.consumed  # bytes of the line before its newline, or known to hold none
    try:
        while True:
            await reader.readexactly(dropped)
            try:
                await reader.readuntil(b"\n")  # the rest of the line, now within the limit
                return Skipped.TOO_LONG
            except asyncio.LimitOverrunError as more:
                dropped = more.consumed
    except asyncio.IncompleteReadError:  # the input ended inside the line
        return Skipped.TOO_LONG


def unreadable(line: bytes) -> Refusal:
    """Why a line the SDK's message parser refused is no message: not JSON (the parser's words; the same parser,
    pydantic-core's), or JSON that is no message."""
    try:
        value = pydantic_core.from_json(line)
    except ValueError as error:
        return refusal(Unreadable.NOT_JSON, detail=str(error))
    return refusal(Unreadable.NOT_A_MESSAGE, value)


def answer(refused: Refusal) -> SessionMessage:
    """The JSON-RPC error message of a refusal."""
    error = types.ErrorData(code=refused.code, message=refused.message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=refused.request_id, error=error))
