"""The daemon's client protocol, the daemon's side: versioned, newline-delimited JSON requests and replies
(docs/daemon-protocol.md).

Sans-I/O. The one bounded line splitter (`eukhe.core.lines`) cuts a byte stream into request lines; `parse_request`
decodes one strictly into a `Request` (its `args` decoded as the op's record from `eukhe.records.daemon.OPS`) or a
`ProtocolFault` that names the field at fault; the `encode_*` functions make the reply lines from records.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import msgspec

from eukhe.core.lines import Line, LineSplitter, Oversized, Piece
from eukhe.daemon.wire import (
    MAX_LINE_READ_BYTES,
    MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES,
    PROTOCOL_VERSION,
    encode_request,
)
from eukhe.errors import InputError
from eukhe.records.base import Record, decode_json, encode
from eukhe.records.daemon import OPS, ErrorBody, ErrorReply, EventReply, OkReply, RequestEnvelope

JSON = Any
"""Any JSON value."""

HEAD_BYTES = 256
"""Bytes of an oversized request line kept for a diagnostic (its rest is dropped unread)."""

__all__ = [
    "JSON",
    "MAX_LINE_READ_BYTES",
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "PROTOCOL_VERSION",
    "ProtocolFault",
    "Request",
    "encode_error",
    "encode_event",
    "encode_request",
    "encode_result",
    "head_id",
    "parse_request",
    "request_splitter",
]


def request_splitter() -> LineSplitter:
    """The line splitter of one connection: request lines of at most MAX_LINE_READ_BYTES."""
    return LineSplitter(MAX_LINE_READ_BYTES, HEAD_BYTES)


@dataclass(frozen=True, slots=True)
class Request:
    """One well-formed request: its id, its op and its arguments, decoded as the op's record."""

    id: int | str
    op: str
    args: Any


@dataclass(frozen=True, slots=True)
class ProtocolFault:
    """A line that is not a well-formed request: answered with one error reply, under its id if it had one."""

    id: int | str | None
    code: str
    message: str
    field: str | None = None


def _loose(line: bytes) -> dict[str, Any]:
    """A line that failed to decode, read loosely for its id and version (an empty dict if it is not an object)."""
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _id_of(value: dict[str, Any]) -> int | str | None:
    """The id of a refused line, when it has a usable one (the refusal goes out under it)."""
    found = value.get("id")
    usable = (isinstance(found, int) and not isinstance(found, bool)) or (isinstance(found, str) and len(found) <= 128)
    return found if usable else None


HEAD_ID = re.compile(
    rb'\s*\{\s*(?:"(?:v|op)"\s*:\s*(?:-?[0-9]+|"[^"\\]*")\s*,\s*)*"id"\s*:\s*(?P<id>-?[0-9]+|"[^"\\]*")\s*[,}]'
)
"""The id of an oversized line, read from its head: the first key, or one after `v` and `op` (as every client here
writes a request: `{"v":1,"id":7,"op":...`), an integer or a string without escapes."""


def head_id(head: bytes) -> int | str | None:
    """The id an oversized line's first bytes show, when they show a usable one (its refusal goes out under it)."""
    found = HEAD_ID.match(head)
    if found is None:
        return None
    try:
        return _id_of({"id": json.loads(found.group("id"))})
    except ValueError:  # not UTF-8, or a control character in the string
        return None


def parse_request(piece: Piece | bytes) -> Request | ProtocolFault:
    """A request line -> Request, or the fault it gets a reply for (naming the field at fault)."""
    if isinstance(piece, Oversized):
        message = f"request line of {piece.length} bytes is over {MAX_LINE_READ_BYTES}"
        return ProtocolFault(head_id(piece.head), "oversized", message)
    line = piece.data if isinstance(piece, Line) else piece
    try:
        envelope = decode_json(line, RequestEnvelope, code="malformed", what="request")
    except InputError as error:
        loose = _loose(line)
        if "v" in loose and loose["v"] != PROTOCOL_VERSION:  # another version's request: say so, not what is odd in it
            message = f"protocol version {loose['v']!r}; this daemon speaks v{PROTOCOL_VERSION}"
            return ProtocolFault(_id_of(loose), "unsupported_version", message, "v")
        return ProtocolFault(_id_of(loose), "malformed", str(error), error.field)
    if isinstance(envelope.id, str) and len(envelope.id) > 128:
        return ProtocolFault(None, "malformed", "request: id must be an integer or a string of at most 128", "id")
    if envelope.v != PROTOCOL_VERSION:
        message = f"protocol version {envelope.v!r}; this daemon speaks v{PROTOCOL_VERSION}"
        return ProtocolFault(envelope.id, "unsupported_version", message, "v")
    op = OPS.get(envelope.op)
    if op is None:
        return ProtocolFault(envelope.id, "unknown_op", f"unknown request {envelope.op!r}; known: {sorted(OPS)}", "op")
    try:
        args = decode_json(bytes(envelope.args), op.args, code="bad_args", what=envelope.op, prefix="args")
    except InputError as error:
        return ProtocolFault(envelope.id, "bad_args", str(error), error.field)
    return Request(envelope.id, envelope.op, args)


def _line(reply: Record) -> bytes:
    return encode(reply) + b"\n"


def encode_result(request_id: int | str | None, result: JSON) -> bytes:
    """A success reply line (`result` a record, or plain JSON values)."""
    return _line(OkReply(v=PROTOCOL_VERSION, id=request_id, ok=True, result=result))


def encode_error(
    request_id: int | str | None,
    code: str,
    message: str,
    field: str | None = None,
    details: dict[str, Any] | None = None,
) -> bytes:
    """An error reply line."""
    body = ErrorBody(code=code, message=message, field=field, details=details)
    return _line(ErrorReply(v=PROTOCOL_VERSION, id=request_id, ok=False, error=body))


def encode_event(request_id: int | str, event: JSON) -> bytes:
    """One event of a request, before its reply."""
    return _line(EventReply(v=PROTOCOL_VERSION, id=request_id, event=event))


def to_builtins(value: object) -> JSON:
    """A record (or plain values) as plain JSON values."""
    return msgspec.to_builtins(value)
