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
MAX_REQUEST_BYTES = 32 << 20
"""Longest request line a client sends (without its newline): 32 MiB, room for a file's content or a long script
(a request's JSON is what one message to `eukhe mcp` carries, at most 64 MiB, less its escapes). A client refuses a
longer one before sending it (`too_large`, naming its largest field: `largest_field`)."""
RELAY_HEADROOM_BYTES = 4096
"""What a request line may grow by when the supervisor relays it to a worker (its record's defaults written out)."""
MAX_LINE_READ_BYTES = MAX_REQUEST_BYTES + RELAY_HEADROOM_BYTES
"""Longest request line the daemon reads; a longer one gets error `oversized` (under its id when its first bytes
show it) and is dropped unread."""
MAX_REPLY_BYTES = 64 << 20
"""Longest reply line a client accepts."""
ARGUMENTS_UNDER = {"tool.call": "args"}
"""Ops whose caller's own arguments sit under one key of the request's `args` (a tool call's are the tool's): a
field is named from there."""
MAX_ARGUMENT_BYTES = 32 * 4096 - 1
"""Longest single argument Linux passes to a program (MAX_ARG_STRLEN, its NUL not counted)."""
FIELD_BOUNDS: dict[tuple[str, str], tuple[int, str]] = {
    ("bash", "command"): (
        MAX_ARGUMENT_BYTES,
        "one argument of a program may have on Linux (bash runs `bash -c COMMAND`)",
    ),
}
"""(op or tool, field) -> the field's own bound in UTF-8 bytes, below the request's, and what sets it."""


def encode_request(request_id: int | str, op: str, args: dict[str, JSON] | None = None) -> bytes:
    """A request line, as the client writes it."""
    payload = {"v": PROTOCOL_VERSION, "id": request_id, "op": op, "args": args or {}}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def own_arguments(op: str, args: JSON) -> tuple[str, JSON]:
    """The name a request's caller knows it by and the caller's own arguments: a tool call's tool and its arguments,
    else the op and its `args`."""
    under = ARGUMENTS_UNDER.get(op)
    if under is not None and isinstance(args, dict) and isinstance(args.get(under), dict):
        return str(args.get("tool", op)), args[under]
    return op, args


def over_field_bound(op: str, args: JSON) -> tuple[str, int, int, str] | None:
    """The first field over its own bound (FIELD_BOUNDS): its name, its UTF-8 bytes, the bound and what sets it."""
    name, own = own_arguments(op, args)
    if not isinstance(own, dict):
        return None
    for (bound_op, field), (limit, why) in FIELD_BOUNDS.items():
        value = own.get(field)
        if bound_op == name and isinstance(value, str) and len(value) > limit // 4:  # a str of n chars: n to 4n bytes
            size = len(value.encode("utf-8", "surrogatepass"))
            if size > limit:
                return field, size, limit, why
    return None


def largest_field(args: JSON, op: str = "") -> tuple[str, int]:
    """The field of a request's `args` that takes the most of its line, and its bytes as JSON: a dotted path to a
    value that is not an object or a list (`content`; `names.2`), named from where the caller's own arguments sit
    (ARGUMENTS_UNDER)."""
    _, args = own_arguments(op, args)
    best = ("", -1)
    stack: list[tuple[str, JSON]] = [("", args)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict) and value:
            stack.extend((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
        elif isinstance(value, list) and value:
            stack.extend((f"{path}.{index}" if path else str(index), item) for index, item in enumerate(value))
        else:
            size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            if size > best[1]:
                best = (path, size)
    return best
