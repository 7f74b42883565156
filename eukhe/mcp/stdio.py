"""The MCP channel on stdin and stdout, read and written by the event loop itself.

The SDK's `stdio_server` reads each line and writes each message in a worker thread (`anyio.wrap_file`): three
thread hand-offs per tool call, about 0.4 ms of the round trip the benchmark measures (bench/mcp_roundtrip.py).
Here the same framing runs on the loop through asyncio pipe transports. Messages are parsed and written by the
SDK's own models (`jsonrpc_message_adapter`, `model_dump_json`), exactly as its transport does, and handed to the
SDK's server as the streams its `Server.run` takes: nothing of JSON-RPC is written here.

As with the SDK's transport, fd 0 and fd 1 are taken over: the wire gets private duplicates, fd 0 reads the null
device and fd 1 writes to stderr, so stray output (a library's print, a child that inherits them) never reaches the
channel. They stay so until the process exits (`eukhe mcp` ends when the channel does).

When stdin or stdout is not a pipe, socket or character device (a regular file, say), the loop cannot watch it, and
the SDK's own transport serves instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

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

    async def read_lines() -> None:
        async with incoming_send:
            while True:
                try:
                    line = await reader.readline()
                except ValueError as error:  # a line past MAX_LINE_BYTES: dropped, said, and the channel goes on
                    await incoming_send.send(error)
                    continue
                if not line:
                    return
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as error:
                    await incoming_send.send(error)
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
            with anyio.move_on_after(FLUSH_S):
                await written.wait()
            group.cancel_scope.cancel()
    finally:
        read_transport.close()
        write_transport.close()
