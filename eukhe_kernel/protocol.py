"""The wire format of the kernel protocol (S3 "The protocol"): NDJSON frames, `event` and `id` keys first.

Shared by the stub (which writes frames) and by tests that write frames "as the runtime writes them". The host's
gate reads only a frame's head when the line is over its limit, so the head must name the event and the id.
"""

from __future__ import annotations

import json
import json.encoder
from typing import Any

PROTOCOL_VERSION = 1
"""Sent in the `ready` frame; the host refuses a kernel that speaks another version."""

MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""A `display` or `host_request` frame over this fails its cell before any byte is written (S3 protocol 7)."""

STREAM_FRAME_CHARS = 256 * 1024
"""Characters of output per stream frame; JSON escaping keeps such a frame far below the host's 32 MiB line."""

RESULT_REPR_CHARS = 1024 * 1024
"""A trailing expression's repr is cut to this many characters (the host bounds it again)."""

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)
_STRING = json.encoder.encode_basestring_ascii
"""How `_ENCODER` writes a string (key or value): the same function, called directly."""


class PayloadTooLargeError(ValueError):
    """A `display` or `host_request` payload is over MAX_PAYLOAD_BYTES; raised in the cell, nothing is written."""

    def __init__(self, event: str, size: int) -> None:
        super().__init__(
            f"the {event} payload is {size} bytes, over the kernel protocol's limit of {MAX_PAYLOAD_BYTES} bytes "
            f"(16 MiB); nothing was sent"
        )
        self.event = event
        self.size = size


def encode_frame(event: str, frame_id: str | int | None, fields: dict[str, Any] | None = None) -> bytes:
    """One frame as one line: `{"event":...,"id":...,<fields>}\\n` (ASCII, strict JSON).

    Raises ValueError for a value strict JSON cannot carry (NaN, infinity) and TypeError for a non-JSON type.
    """
    head = (
        '{"event":'
        + _STRING(event)
        + ',"id":'
        + (_STRING(frame_id) if type(frame_id) is str else _ENCODER.encode(frame_id))
    )
    if not fields:
        return (head + "}\n").encode("ascii")
    if all(type(key) is str and type(value) is str for key, value in fields.items()):
        # Most frames carry strings only (text, repr, status): the encoder's own escaping, without its set-up.
        return (
            head + "," + ",".join(_STRING(key) + ":" + _STRING(value) for key, value in fields.items()) + "}\n"
        ).encode("ascii")
    rest = _ENCODER.encode(fields)  # "{...}"
    return (head + "," + rest[1:] + "\n").encode("ascii")
