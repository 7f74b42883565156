"""The protocol's constants and the request encoder, with no import beyond json (not even typing): the CLI client
loads only this. The daemon's side (strict decoding, replies from records) is `eukhe.daemon.protocol`;
docs/daemon-protocol.md is the reference.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    JSON: TypeAlias = Any
    """Any JSON value (a name for type checking only)."""

PROTOCOL_VERSION = 1
"""Bumped on any incompatible change; a request with another `v` gets error `unsupported_version`."""
MAX_REQUEST_BYTES = 1 << 20
"""Longest request line (without its newline); longer ones get error `oversized` and are dropped unread."""
MAX_REPLY_BYTES = 64 << 20
"""Longest reply line a client accepts."""


def encode_request(request_id: int | str, op: str, args: dict[str, JSON] | None = None) -> bytes:
    """A request line, as the client writes it."""
    payload = {"v": PROTOCOL_VERSION, "id": request_id, "op": op, "args": args or {}}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
