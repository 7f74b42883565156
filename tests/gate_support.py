"""Frames of the host protocol written as the runtime writes them (shared by the gate laws and the tie)."""

from __future__ import annotations

from eukhe.core.gate import FrameId, ModelFrame
from eukhe_kernel.protocol import encode_frame


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
