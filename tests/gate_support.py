"""The spec's model of the frame gate over abstract frames, and frames of the host protocol written as the runtime
writes them (shared by the gate laws and the tie, which hold the byte-level gate in eukhe.core.gate to the model)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eukhe.core.gate import DEFAULT_LIMITS, Admission, FrameId, GateLimits, Refusal, RefusalReason, Verdict
from eukhe_kernel.protocol import encode_frame


@dataclass(frozen=True, slots=True)
class ModelFrame:
    """An abstract host request: its id, its type (None: no type) and its line length in bytes."""

    id: FrameId
    kind: str | None
    length: int


@dataclass(frozen=True, slots=True)
class ModelReply:
    """The one reply to a frame: `ok` is the handler's reply; else the refusal's status and reason."""

    id: FrameId
    status: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Transcript:
    """One reply per frame, in the frames' order, and the ids of the frames a handler ran for."""

    replies: tuple[ModelReply, ...]
    served: tuple[FrameId, ...]


def serve(frames: Iterable[ModelFrame], served: frozenset[str], limits: GateLimits = DEFAULT_LIMITS) -> Transcript:
    """The model: over the limit -> error; used id -> duplicate; no type -> error; unserved -> error; else run."""
    replies: list[ModelReply] = []
    ran: list[FrameId] = []
    seen: list[FrameId] = []
    for frame in frames:
        if frame.length > limits.line:
            replies.append(ModelReply(frame.id, "error", RefusalReason.OVER_LIMIT.value))
        elif frame.id in seen:
            replies.append(ModelReply(frame.id, "duplicate", RefusalReason.DUPLICATE.value))
        elif frame.kind is None:
            replies.append(ModelReply(frame.id, "error", RefusalReason.MISSING_TYPE.value))
        elif frame.kind not in served:
            replies.append(ModelReply(frame.id, "error", RefusalReason.UNSERVED.value))
        else:
            replies.append(ModelReply(frame.id, "ok"))
            ran.append(frame.id)
            seen = [*seen, frame.id][-limits.ids_kept :]
    return Transcript(tuple(replies), tuple(ran))


def reply_of(verdict: Verdict) -> ModelReply | None:
    """The model's view of a verdict: the reply it stands for (an admission stands for the handler's `ok`)."""
    if isinstance(verdict, Admission):
        return ModelReply(verdict.id, "ok")
    if isinstance(verdict, Refusal):
        return ModelReply(verdict.id, verdict.status, verdict.reason.value)
    return None


def request_line(frame_id: FrameId, kind: str | None, length: int) -> bytes:
    """A host-request line (no newline) of exactly `length` bytes if it can be that short, else the shortest."""
    fields: dict[str, object] = {} if kind is None else {"type": kind}
    fields["cell"] = "c1"
    fields["params"] = {"pad": ""}
    base = encode_frame("host_request", frame_id, fields)[:-1]
    padding = max(0, length - len(base))
    fields["params"] = {"pad": "x" * padding}
    return encode_frame("host_request", frame_id, fields)[:-1]


def model_frame(frame_id: FrameId, kind: str | None, length: int) -> tuple[ModelFrame, bytes]:
    """The abstract frame and its line; the model's length is the line's real length."""
    line = request_line(frame_id, kind, length)
    return ModelFrame(frame_id, kind, len(line)), line


def shortest(frame_id: FrameId, kind: str | None) -> int:
    """The length of the shortest line for this id and kind."""
    return len(request_line(frame_id, kind, 0))
