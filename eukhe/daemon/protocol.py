"""The daemon's client protocol: versioned, newline-delimited JSON requests and replies (docs/daemon-protocol.md).

Sans-I/O: `LineSplitter` cuts a byte stream into request lines (an oversized line becomes one `Oversized` marker and
is skipped up to its newline), `parse_request` turns a line into a `Request` or a `ProtocolFault`, and the `encode_*`
functions make the reply lines. The supervisor, the workers and the client share it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from eukhe.daemon.wire import (
    MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES,
    PROTOCOL_VERSION,
    encode_error,
    encode_event,
    encode_request,
    encode_result,
)

JSON = Any
"""Any JSON value."""

__all__ = [
    "JSON",
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "PROTOCOL_VERSION",
    "LineSplitter",
    "Oversized",
    "ProtocolFault",
    "Request",
    "encode_error",
    "encode_event",
    "encode_request",
    "encode_result",
    "oversized_fault",
    "parse_request",
]


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit: reported once, as soon as it passes the limit; the rest of it is dropped."""

    head: bytes  # its first bytes, for a diagnostic


class LineSplitter:
    """Cuts a byte stream into lines of at most `limit` bytes; an over-long line yields one Oversized and is dropped."""

    def __init__(self, limit: int = MAX_REQUEST_BYTES) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._skipping = False  # inside an oversized line, dropping bytes up to its newline

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Take the next chunk; return the complete lines (without newline) and markers, in order."""
        out: list[bytes | Oversized] = []
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            piece = data[start:end]
            if not self._skipping:
                self._buffer += piece
                if len(self._buffer) > self._limit:
                    self._skipping = True
                    out.append(Oversized(bytes(self._buffer[:256])))
                    self._buffer = bytearray()
            if newline < 0:
                break
            if self._skipping:
                self._skipping = False
            else:
                out.append(bytes(self._buffer))
                self._buffer = bytearray()
            start = newline + 1
        return out

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held so far."""
        return len(self._buffer)


@dataclass(frozen=True, slots=True)
class Request:
    """One well-formed request."""

    id: int | str
    op: str
    args: dict[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProtocolFault:
    """A line that is not a well-formed request: answered with one error reply, under its id if it had one."""

    id: int | str | None
    code: str
    message: str


def _valid_id(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and len(value) <= 128)


def parse_request(line: bytes) -> Request | ProtocolFault:
    """A request line -> Request, or the fault it gets a reply for."""
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return ProtocolFault(None, "malformed", f"not a JSON object: {error}")
    if not isinstance(value, dict):
        return ProtocolFault(None, "malformed", "a request is a JSON object")
    request_id = value.get("id")
    if not _valid_id(request_id):
        return ProtocolFault(None, "malformed", "a request needs an `id` (an integer or a short string)")
    assert isinstance(request_id, int | str)
    if value.get("v") != PROTOCOL_VERSION:
        return ProtocolFault(
            request_id, "unsupported_version", f"protocol version {value.get('v')!r}; this daemon speaks v1"
        )
    op = value.get("op")
    if not isinstance(op, str) or not op:
        return ProtocolFault(request_id, "malformed", "a request needs an `op` (a string)")
    args = value.get("args", {})
    if not isinstance(args, dict):
        return ProtocolFault(request_id, "malformed", "`args` must be a JSON object")
    extra = set(value) - {"v", "id", "op", "args"}
    if extra:
        return ProtocolFault(request_id, "malformed", f"unknown request fields: {sorted(extra)}")
    return Request(request_id, op, args)


def oversized_fault(marker: Oversized, limit: int = MAX_REQUEST_BYTES) -> ProtocolFault:
    """The reply an oversized line gets (no id: its head is not parsed)."""
    return ProtocolFault(None, "oversized", f"request line longer than {limit} bytes; dropped")
