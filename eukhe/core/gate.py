"""The frame gate (S3 "The protocol" 1-7): one pure decision on each kernel frame before any handler sees it.

Rules, all in this file:
- The shell's splitter hands the gate each line as a `Line` (whole, within the line limit) or an `Oversized`
  (the first `head` bytes and the total length; the rest was dropped unread).
- A host request (`"event": "host_request"`) gets exactly one verdict that names its id: an `Admission` (within
  the limit, an unseen id, a served type: only these reach a handler) or a `Refusal` (one reply, no effect).
  A used id is refused with status `duplicate` before anything else, because that reply goes out under the id of
  a request possibly still in flight and the runtime drops it; an error reply there would settle the first.
- Other events answer the host's own requests (`Event`); an oversized stream or display event is `Dropped` with
  a diagnostic.
- What the host cannot answer is a `ProtocolFault`: a non-UTF-8 line, a non-JSON or non-protocol line, an
  oversized line whose head names no host request (nor a stream or display event).

Verdicts are a table (see `admit`). The spec's model of the same rules over abstract frames, which the laws and the
tie hold this byte-level gate to, lives with them (tests/gate_support.py).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eukhe.core.lines import Line, Oversized, Piece

LINE_LIMIT = 32 * 1024 * 1024
"""A frame line (without its newline) longer than this is over the limit (S3 protocol 7)."""
HEAD_LIMIT = 4 * 1024
"""Bytes of an oversized line the gate reads: enough for `event` and `id`, which the runtime writes first."""
IDS_KEPT = 1024
"""How many accepted host-request ids the gate remembers to refuse a repeat."""

FrameId = str | int

HOST_REQUEST = "host_request"
STREAM_EVENTS = frozenset({"stdout", "stderr", "display"})
"""Events whose oversized frames are dropped with a diagnostic: losing them loses output, not protocol state."""
KERNEL_EVENTS = frozenset({"ready", "stdout", "stderr", "display", "result", "error", "done", "diagnostic", "process"})
"""The events that answer the host's own requests (and the kernel's notices)."""


@dataclass(frozen=True, slots=True)
class GateLimits:
    """The gate's constants; tests shrink them to reach every rule quickly."""

    line: int = LINE_LIMIT
    head: int = HEAD_LIMIT
    ids_kept: int = IDS_KEPT

    def __post_init__(self) -> None:
        for name in ("line", "head", "ids_kept"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GateLimits.{name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS = GateLimits()


# ---- verdicts ---------------------------------------------------------------------------------------------


class RefusalReason(enum.Enum):
    """Why a host request gets an error (or duplicate) reply and no handler."""

    OVER_LIMIT = "over_limit"  # the line is over the size limit (S3 protocol 3)
    MISSING_TYPE = "missing_type"  # no `type`, or not a string (S3 protocol 4)
    UNSERVED = "unserved"  # a type no handler serves (S3 protocol 4)
    DUPLICATE = "duplicate"  # an id already accepted (S3 protocol 4): status `duplicate`


class FaultReason(enum.Enum):
    """Why the host cannot answer a frame at all (S3 protocol 6)."""

    NOT_UTF8 = "not_utf8"  # the line is not UTF-8
    NOT_JSON = "not_json"  # the line is not one JSON value
    NOT_PROTOCOL = "not_protocol"  # JSON, but no known event, or a host request without a usable id
    OVERSIZED_HEADERLESS = "oversized_headerless"  # over the limit, and its head names no host request


@dataclass(frozen=True, slots=True)
class Admission:
    """An accepted host request: its handler runs, and its result or error is the one reply."""

    id: FrameId
    kind: str
    params: Any
    cell: str | None
    cwd: str | None = None  # the kernel's current directory when it asked (relative paths in params start there)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A host request refused: one reply (status `error`, or `duplicate` for a used id), no handler, no effect."""

    id: FrameId
    reason: RefusalReason
    message: str

    @property
    def status(self) -> str:
        """The reply's status: `duplicate` for a used id, else `error`."""
        return "duplicate" if self.reason is RefusalReason.DUPLICATE else "error"

    def reply(self) -> dict[str, Any]:
        """The host_reply request the host writes for this refusal."""
        return {
            "request": "host_reply",
            "id": self.id,
            "status": self.status,
            "error": {"code": self.reason.value, "message": self.message},
        }


@dataclass(frozen=True, slots=True)
class Event:
    """A kernel event that answers one of the host's own requests (or a notice); no reply."""

    event: str
    id: str | None
    frame: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Dropped:
    """An oversized stream or display event, dropped; the host writes the diagnostic."""

    event: str
    id: str | None
    length: int
    diagnostic: str


@dataclass(frozen=True, slots=True)
class ProtocolFault:
    """A frame the host cannot answer: protocol repair replaces the kernel, and the request in flight fails."""

    reason: FaultReason
    detail: str


Verdict = Admission | Refusal | Event | Dropped | ProtocolFault


@dataclass(frozen=True, slots=True)
class GateState:
    """The ids of accepted host requests, oldest first, at most `ids_kept` of them."""

    order: tuple[FrameId, ...] = ()
    seen: frozenset[FrameId] = field(default_factory=frozenset)

    def remember(self, frame_id: FrameId, ids_kept: int) -> GateState:
        """The state after accepting `frame_id`: the oldest id is forgotten past `ids_kept`."""
        order = (*self.order, frame_id)[-ids_kept:]
        return GateState(order, frozenset(order))


# ---- the gate ---------------------------------------------------------------------------------------------

_HEAD = re.compile(
    rb'\A\s*\{\s*"event"\s*:\s*"(?P<event>[A-Za-z_.]{1,64})"\s*,\s*"id"\s*:\s*'
    rb'(?P<id>"(?:[^"\\\x00-\x1f]|\\.){0,1024}"|-?(?:0|[1-9][0-9]{0,18})|null)\s*[,}]'
)


_FRAME_DECODER = json.JSONDecoder()
"""The frame's text is decoded already: json.loads would only add its argument checks, per frame."""


def _id_of(value: Any) -> FrameId | None:
    """A usable host-request id: a string or an integer (never a bool)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def admit(
    state: GateState, piece: Piece, served: frozenset[str], limits: GateLimits = DEFAULT_LIMITS
) -> tuple[GateState, Verdict]:
    """Decide one frame: the next state and the verdict (the whole of S3 protocol 2-6)."""
    if isinstance(piece, Oversized):
        return state, _admit_oversized(piece, limits)
    if len(piece.data) > limits.line:  # a splitter bug must not let a long line through
        return state, _admit_oversized(Oversized(piece.data[: limits.head], len(piece.data)), limits)
    try:
        text = piece.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return state, ProtocolFault(FaultReason.NOT_UTF8, f"a kernel frame is not UTF-8 (byte {exc.start})")
    try:
        frame = _FRAME_DECODER.decode(text)
    except ValueError as exc:
        return state, ProtocolFault(FaultReason.NOT_JSON, f"a kernel frame is not JSON ({exc}): {text[:80]!r}")
    if not isinstance(frame, dict):
        return state, ProtocolFault(FaultReason.NOT_PROTOCOL, f"a kernel frame is not a JSON object: {text[:80]!r}")
    event = frame.get("event")
    if event == HOST_REQUEST:
        return _admit_request(state, frame, served, limits)
    if isinstance(event, str) and event in KERNEL_EVENTS:
        frame_id = frame.get("id")
        if frame_id is not None and not isinstance(frame_id, str):
            return state, ProtocolFault(FaultReason.NOT_PROTOCOL, f"a {event} frame has a non-string id")
        return state, Event(event, frame_id, frame)
    return state, ProtocolFault(FaultReason.NOT_PROTOCOL, f"a kernel frame names no known event: {text[:80]!r}")


def _admit_request(
    state: GateState, frame: Mapping[str, Any], served: frozenset[str], limits: GateLimits
) -> tuple[GateState, Verdict]:
    frame_id = _id_of(frame.get("id"))
    if frame_id is None:
        return state, ProtocolFault(FaultReason.NOT_PROTOCOL, "a host request has no usable id; it cannot be answered")
    if frame_id in state.seen:
        message = f"host request id {frame_id!r} was already used; this repeat is ignored"
        return state, Refusal(frame_id, RefusalReason.DUPLICATE, message)
    kind = frame.get("type")
    if not isinstance(kind, str):
        return state, Refusal(frame_id, RefusalReason.MISSING_TYPE, "a host request needs a string `type`")
    if kind not in served:
        return state, Refusal(frame_id, RefusalReason.UNSERVED, f"the host serves no request of type {kind!r}")
    cell, cwd = frame.get("cell"), frame.get("cwd")
    return state.remember(frame_id, limits.ids_kept), Admission(
        frame_id,
        kind,
        frame.get("params"),
        cell if isinstance(cell, str) else None,
        cwd if isinstance(cwd, str) else None,
    )


def _admit_oversized(piece: Oversized, limits: GateLimits) -> Verdict:
    match = _HEAD.match(piece.head[: limits.head])
    if match is not None:
        event = match.group("event").decode("ascii")
        try:
            frame_id = json.loads(match.group("id").decode("utf-8"))
        except ValueError:
            frame_id = None
        if event == HOST_REQUEST and _id_of(frame_id) is not None:
            message = f"the host request is {piece.length} bytes, over the frame limit of {limits.line} bytes"
            return Refusal(frame_id, RefusalReason.OVER_LIMIT, message)
        if event in STREAM_EVENTS and (frame_id is None or isinstance(frame_id, str)):
            diagnostic = f"dropped a {event} frame of {piece.length} bytes, over the frame limit of {limits.line}"
            return Dropped(event, frame_id, piece.length, diagnostic)
    return ProtocolFault(
        FaultReason.OVERSIZED_HEADERLESS,
        f"a kernel line of {piece.length} bytes is over the frame limit of {limits.line} and names no host request",
    )


def piece_of(line: bytes, limits: GateLimits = DEFAULT_LIMITS) -> Piece:
    """What a correct splitter hands the gate for one whole line (the laws use it; the shell streams)."""
    if len(line) <= limits.line:
        return Line(line)
    return Oversized(line[: limits.head], len(line))
