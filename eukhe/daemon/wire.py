"""The protocol's constants and line encoders, with no import beyond json (not even typing): the CLI client loads
only this.

(`eukhe.daemon.protocol` re-exports all of it and adds the parsing side; docs/daemon-protocol.md is the reference.)
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any, TypeAlias

    JSON: TypeAlias = Any
    """Any JSON value (a name for type checking only: `eukhe.daemon.protocol.JSON` is the run-time alias)."""

PROTOCOL_VERSION = 1
"""Bumped on any incompatible change; a request with another `v` gets error `unsupported_version`."""
MAX_REQUEST_BYTES = 1 << 20
"""Longest request line (without its newline); longer ones get error `oversized` and are skipped."""
MAX_REPLY_BYTES = 64 << 20
"""Longest reply line a client accepts."""


def _line(payload: dict[str, JSON]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def encode_request(request_id: int | str, op: str, args: dict[str, JSON] | None = None) -> bytes:
    """A request line, as the client writes it."""
    return _line({"v": PROTOCOL_VERSION, "id": request_id, "op": op, "args": args or {}})


def encode_result(request_id: int | str | None, result: JSON) -> bytes:
    """A success reply line."""
    return _line({"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "result": result})


def encode_error(request_id: int | str | None, code: str, message: str) -> bytes:
    """An error reply line."""
    return _line({"v": PROTOCOL_VERSION, "id": request_id, "ok": False, "error": {"code": code, "message": message}})


def encode_event(request_id: int | str, event: JSON) -> bytes:
    """One event of a streaming request (`watch`); the stream ends with a normal reply."""
    return _line({"v": PROTOCOL_VERSION, "id": request_id, "event": event})
