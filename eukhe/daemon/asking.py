"""A daemon client for the daemon's own processes (asyncio): a worker asks the supervisor, e.g. to start a child.

One connection per request; events are skipped. Cancelled, it sends the protocol's `cancel` for its request and
waits (bounded) for the request's own answer before the cancellation goes on, so the far side has ended the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from eukhe.daemon.server import close_writer
from eukhe.daemon.wire import MAX_REPLY_BYTES, encode_request
from eukhe.errors import CATALOGUE, CodedError

CANCEL_WAIT_S = 30.0
"""How long a cancelled request waits for the far side's answer (its job killed) before it lets go."""


class AskError(CodedError):
    """The daemon refused a request: its catalogue code, message, field and details, as they came."""


async def ask(socket: Path, op: str, args: dict[str, Any]) -> Any:
    """Send one request to the daemon at `socket`; its result, or AskError with the daemon's code."""
    try:
        reader, writer = await asyncio.open_unix_connection(str(socket), limit=MAX_REPLY_BYTES)
    except OSError as error:
        raise AskError("daemon_unavailable", f"no daemon at {socket}: {error.strerror or error}") from error
    try:
        writer.write(encode_request(1, op, args))
        await writer.drain()
        try:
            return await _answer(reader)
        except asyncio.CancelledError:
            writer.write(encode_request("cancel", "cancel", {"request": 1}))
            with contextlib.suppress(Exception):
                await writer.drain()
                await asyncio.wait_for(_answer(reader), CANCEL_WAIT_S)
            raise
    finally:
        await close_writer(writer)


async def _answer(reader: asyncio.StreamReader) -> Any:
    """Read replies until request 1's own (events and the cancel's answer are skipped)."""
    while True:
        line = await reader.readline()
        if not line:
            raise AskError("daemon_protocol", "the daemon closed the connection before answering")
        reply = json.loads(line)
        if reply.get("id") != 1 or "event" in reply:
            continue
        if reply.get("ok"):
            return reply.get("result")
        fault = reply.get("error") or {}
        code = str(fault.get("code")) if fault.get("code") in CATALOGUE else "internal"
        details = fault.get("details") if isinstance(fault.get("details"), dict) else None
        raise AskError(code, str(fault.get("message", "")), field=fault.get("field"), details=details)
