"""A daemon client for the daemon's own processes (asyncio): a worker asks the supervisor, e.g. to start a child.

One connection per request; events go to `on_event` (else they are skipped); the reply is read by the one reply reader
(`eukhe.daemon.replies`) as the op's answer record. Cancelled, it sends the protocol's `cancel` for its request and
waits (bounded, on its clock) for the request's own answer before the cancellation goes on, so the far side has ended
the work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from eukhe.clock import Clock, MonotonicClock, wait_within
from eukhe.daemon.replies import EVENT, RESULT, DaemonError, DaemonProtocolError, decode_reply, reply_outcome
from eukhe.daemon.server import close_writer
from eukhe.daemon.wire import MAX_REPLY_BYTES, encode_request
from eukhe.errors import SHORTAGES
from eukhe.records.base import Record

CANCEL_WAIT_MS = 30_000
"""How long a cancelled request waits for the far side's answer (its job killed) before it lets go."""
CANCEL_ID = "cancel"

A = TypeVar("A", bound=Record)


async def ask(
    socket: Path,
    op: str,
    args: dict[str, Any],
    answer: type[A],
    *,
    clock: Clock | None = None,
    on_event: Callable[[Any], None] | None = None,
) -> A:
    """Send one request to the daemon at `socket`; its answer as the record `answer`, or DaemonError with the
    daemon's code (`daemon_unavailable` when nothing listens, `resource_exhausted` when this process has no descriptor
    for the connection; DaemonProtocolError when the reply is not one)."""
    try:
        reader, writer = await asyncio.open_unix_connection(str(socket), limit=MAX_REPLY_BYTES)
    except OSError as error:
        if error.errno in SHORTAGES:  # this process is out of descriptors (or the backlog is full): the daemon is there
            raise DaemonError("resource_exhausted", f"cannot connect to {socket}: {error.strerror or error}") from error
        raise DaemonError("daemon_unavailable", f"no daemon at {socket}: {error.strerror or error}") from error
    try:
        writer.write(encode_request(1, op, args))
        await writer.drain()
        try:
            return await _answer(reader, answer, on_event)
        except asyncio.CancelledError:
            writer.write(encode_request(CANCEL_ID, "cancel", {"request": 1}))
            with contextlib.suppress(Exception):
                await writer.drain()
                waiting = asyncio.ensure_future(_answer(reader, answer))
                try:
                    await wait_within(clock or MonotonicClock(), waiting, CANCEL_WAIT_MS)
                finally:
                    waiting.cancel()
            raise
    finally:
        await close_writer(writer)


async def _answer(reader: asyncio.StreamReader, answer: type[A], on_event: Callable[[Any], None] | None = None) -> A:
    """Read replies until request 1's own (its events go to `on_event`; the cancel's answer is skipped)."""
    while True:
        line = await reader.readline()
        if not line.endswith(b"\n"):
            raise DaemonProtocolError("the daemon closed the connection before answering")
        kind, value = reply_outcome(decode_reply(line), 1, skip=CANCEL_ID, answer=answer)
        if kind == RESULT:
            result: A = value
            return result
        if kind == EVENT and on_event is not None:
            on_event(value)
