"""What `eukhe mcp` answers on stdio to a line that is no MCP message (JSON-RPC 2.0, section 5.1), so that the client
is told instead of waiting on it.

Rules, all in this file (`refusal`):
- A line that is not JSON (bad UTF-8, bad syntax, nested or numbered past the parser's bounds) is `-32700 Parse
  error`, with id null (no id can be read).
- A line that is JSON but no JSON-RPC message (a batch, a wrong `jsonrpc`, no `method`, a bad id ...) is `-32600
  Invalid Request`, with its id when it has one a request may have (a string or an integer), else null.
- A line longer than the bound on a message is `-32600 Invalid Request`, with id null (it is not read).
- A blank line is no message and gets nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class Unreadable(enum.Enum):
    """Why a line is no message."""

    NOT_JSON = "not_json"  # the JSON parser refused it
    NOT_A_MESSAGE = "not_a_message"  # JSON, which no JSON-RPC message matches
    TOO_LONG = "too_long"  # past the bound on a line, dropped unread


@dataclass(frozen=True, slots=True)
class Refusal:
    """The JSON-RPC error answering an unreadable line."""

    code: int
    request_id: str | int | None
    message: str


def blank(line: bytes) -> bool:
    """Whether a line is blank (only whitespace): no message, answered by nothing."""
    return not line.strip()


def refusal(why: Unreadable, value: object = None, *, detail: str = "") -> Refusal:
    """The error for a line that is no message (`value`: its JSON value, for NOT_A_MESSAGE; `detail`: the parser's
    or the bound's words)."""
    said = f": {detail}" if detail else ""
    if why is Unreadable.NOT_JSON:
        return Refusal(PARSE_ERROR, None, f"Parse error: the line is not JSON{said}")
    if why is Unreadable.TOO_LONG:
        return Refusal(INVALID_REQUEST, None, f"Invalid Request: the line is too long{said}")
    given = value.get("id") if isinstance(value, dict) else None
    request_id = given if isinstance(given, (str, int)) and not isinstance(given, bool) else None
    return Refusal(INVALID_REQUEST, request_id, f"Invalid Request: the line is no JSON-RPC message{said}")
