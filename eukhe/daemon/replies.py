"""The one reader of the daemon's replies (docs/daemon-protocol.md), for every client of a daemon: the CLI, the MCP
server, the supervisor relaying a worker's replies, and a worker asking the supervisor.

`decode_reply` makes a reply line a JSON object; `reply_outcome` says what it is for a caller waiting on one request:
one of its events, its answer (as the op's answer record when the caller names it), or its refusal, raised as a
`DaemonError` with the daemon's code. Light on imports, as the CLI's client path needs (tests/unit/test_cli_imports.py):
msgspec is imported only when an answer is read as a record.
"""

from __future__ import annotations

import json

from eukhe.errors import CATALOGUE, CodedError, EukheError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

SKIP = "skip"
"""The reply to the request the caller passes over (its own cancel's)."""
EVENT = "event"
"""One event of the awaited request."""
RESULT = "result"
"""The awaited request's answer."""


class DaemonError(CodedError):
    """An error reply from the daemon: its catalogue code, message, the field at fault and its details."""

    def __init__(
        self, code: str, message: str, field: str | None = None, details: dict[str, object] | None = None
    ) -> None:
        super().__init__(code if code in CATALOGUE else "internal", message, field=field, details=details)


class DaemonProtocolError(EukheError):
    """The daemon's reply broke the protocol (not JSON, wrong id, connection closed mid-reply)."""

    code = "daemon_protocol"


def decode_reply(line: bytes) -> dict[str, Any]:
    """One reply line as a JSON object; an empty line (the connection closed), a line that is not JSON or not an
    object raises DaemonProtocolError."""
    if not line:
        raise DaemonProtocolError("the daemon closed the connection")
    try:
        value = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DaemonProtocolError(f"unreadable reply: {error}") from error
    if not isinstance(value, dict):
        raise DaemonProtocolError("a reply is a JSON object")
    return value


def reply_outcome(
    reply: dict[str, Any], request_id: int | str, skip: str | None = None, answer: type[T] | None = None
) -> tuple[str, Any]:
    """What one reply is for a caller waiting on `request_id`: (SKIP, None) for the reply to `skip`, (EVENT, event)
    for one of its events, (RESULT, result) for its answer (decoded as `answer`, the op's answer record, when given);
    an error reply raises DaemonError, a reply for another id or an answer of the wrong shape DaemonProtocolError."""
    if skip is not None and reply.get("id") == skip:
        return SKIP, None
    if reply.get("id") != request_id:
        raise DaemonProtocolError(f"reply for id {reply.get('id')!r}, expected {request_id!r}")
    if "event" in reply:
        return EVENT, reply["event"]
    if reply.get("ok") is True:
        result = reply.get("result")
        return RESULT, result if answer is None else answer_as(result, answer)
    error = reply.get("error")
    error = error if isinstance(error, dict) else {}
    details = error.get("details")
    field = error.get("field")
    raise DaemonError(
        str(error.get("code", "internal")),
        str(error.get("message", "error")),
        field if isinstance(field, str) else None,
        details if isinstance(details, dict) else None,
    )


def answer_as(result: object, answer: type[T]) -> T:
    """A request's result as its answer record; DaemonProtocolError when it is not one."""
    import msgspec  # noqa: PLC0415  (lazy: the CLI's client path reads results as JSON; CLI start-up time)

    try:
        return msgspec.convert(result, answer)
    except msgspec.ValidationError as error:
        name = getattr(answer, "__name__", None) or str(answer)  # a union of records (CallAnswer) has no __name__
        raise DaemonProtocolError(f"an answer that is not a {name}: {error}") from error
