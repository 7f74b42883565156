"""Laws of the frame gate (S3 "The protocol"; laws/sandbox: proto_*), over free frames and a small scope whole.

Each frame is a host request written as the runtime writes it; the byte-level gate (`admit` on what a splitter
hands it) must give exactly one reply per frame, run exactly the accepted frames, refuse every oversized one
without effect, and agree with the spec's model `serve` reply by reply.
"""

from __future__ import annotations

import functools
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.gate import (
    Admission,
    Dropped,
    Event,
    FaultReason,
    GateLimits,
    GateState,
    Line,
    ModelFrame,
    ModelReply,
    Oversized,
    ProtocolFault,
    Refusal,
    RefusalReason,
    Transcript,
    admit,
    piece_of,
    reply_of,
    serve,
)
from eukhe_kernel.protocol import encode_frame
from tests.gate_support import model_frame, shortest

SERVED = frozenset({"fs.read", "echo"})
KINDS = [None, "fs.read", "echo", "nope", ""]


def gate_transcript(
    lines: list[bytes], served: frozenset[str], limits: GateLimits
) -> tuple[Transcript, list[GateState]]:
    """Run the byte-level gate over whole lines; every verdict on a host request must be a reply."""
    state = GateState()
    replies: list[ModelReply] = []
    ran: list[object] = []
    states = [state]
    for line in lines:
        state, verdict = admit(state, piece_of(line, limits), served, limits)
        reply = reply_of(verdict)
        assert reply is not None, f"a host request got no reply: {verdict}"
        replies.append(reply)
        if isinstance(verdict, Admission):
            ran.append(verdict.id)
        states.append(state)
    return Transcript(tuple(replies), tuple(ran)), states  # type: ignore[arg-type]


@st.composite
def streams(draw: st.DrawFn) -> tuple[GateLimits, list[ModelFrame], list[bytes]]:
    """Limits around a frame's size, and frames with repeated ids, every kind and lengths around the limit."""
    line_limit = draw(st.integers(min_value=90, max_value=400))
    limits = GateLimits(line=line_limit, head=draw(st.integers(64, 4096)), ids_kept=draw(st.integers(1, 6)))
    count = draw(st.integers(0, 12))
    frames: list[ModelFrame] = []
    lines: list[bytes] = []
    for _ in range(count):
        frame_id: str | int = draw(st.one_of(st.sampled_from(["a", "b", "c", "d", "é"]), st.integers(-3, 3)))
        kind = draw(st.sampled_from(KINDS))
        length = draw(
            st.one_of(
                st.just(line_limit),
                st.just(line_limit + 1),
                st.integers(0, 2 * line_limit),
            )
        )
        frame, line = model_frame(frame_id, kind, length)
        frames.append(frame)
        lines.append(line)
    return limits, frames, lines


def check_laws(limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], served: frozenset[str]) -> None:
    """All four proto laws at once, reply by reply, and the gate's transcript equal to the model's."""
    real, states = gate_transcript(lines, served, limits)
    model = serve(frames, served, limits)
    # proto_one_reply_each: one reply per frame, in the frames' order
    assert [reply.id for reply in real.replies] == [frame.id for frame in frames]
    assert [reply.id for reply in model.replies] == [frame.id for frame in frames]
    accepted_before: list[object] = []
    expected_runs = []
    for index, frame in enumerate(frames):
        reply = real.replies[index]
        acceptable = (
            frame.length <= limits.line and frame.kind in served and frame.id not in accepted_before[-limits.ids_kept :]
        )
        # proto_runs_only_accepted and proto_runs_every_accepted: a handler runs exactly for these
        assert (reply.status == "ok") == acceptable, (frame, reply)
        if acceptable:
            accepted_before.append(frame.id)
            expected_runs.append(frame.id)
        # proto_rejects_oversize: an error, no effect
        if frame.length > limits.line:
            assert reply == ModelReply(frame.id, "error", RefusalReason.OVER_LIMIT.value)
            assert states[index + 1] == states[index]
        if reply.status != "ok":
            assert states[index + 1] == states[index]
    assert list(real.served) == expected_runs
    assert real == model


Stream = tuple[GateLimits, list[ModelFrame], list[bytes]]


def law_one_reply_each(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], served: frozenset[str]
) -> None:
    """proto_one_reply_each: every frame gets exactly one reply, in the frames' order (gate and model)."""
    real, _ = gate_transcript(lines, served, limits)
    assert [reply.id for reply in real.replies] == [frame.id for frame in frames]
    assert [reply.id for reply in serve(frames, served, limits).replies] == [frame.id for frame in frames]


def law_runs_only_accepted(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], served: frozenset[str]
) -> None:
    """proto_runs_only_accepted: a handler runs only for a frame within the limit, of a served kind, unseen id."""
    real, _ = gate_transcript(lines, served, limits)
    seen: list[object] = []
    for frame, reply in zip(frames, real.replies, strict=True):
        if reply.status == "ok":
            assert frame.length <= limits.line
            assert frame.kind in served
            assert frame.id not in seen[-limits.ids_kept :]
            seen.append(frame.id)
    assert len(real.served) == len(seen)


def law_runs_every_accepted(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], served: frozenset[str]
) -> None:
    """proto_runs_every_accepted: every such frame reaches its handler, in order."""
    real, _ = gate_transcript(lines, served, limits)
    seen: list[object] = []
    for frame in frames:
        if frame.length <= limits.line and frame.kind in served and frame.id not in seen[-limits.ids_kept :]:
            seen.append(frame.id)
    assert list(real.served) == seen


def law_rejects_oversize(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], served: frozenset[str]
) -> None:
    """proto_rejects_oversize: over the limit, an error reply and no effect on the gate."""
    real, states = gate_transcript(lines, served, limits)
    for index, frame in enumerate(frames):
        if frame.length > limits.line:
            assert real.replies[index] == ModelReply(frame.id, "error", "over_limit")
            assert states[index + 1] == states[index]


@given(streams())
def test_proto_one_reply_each(stream: Stream) -> None:
    law_one_reply_each(*stream, SERVED)


@given(streams())
def test_proto_runs_only_accepted(stream: Stream) -> None:
    law_runs_only_accepted(*stream, SERVED)


@given(streams())
def test_proto_runs_every_accepted(stream: Stream) -> None:
    law_runs_every_accepted(*stream, SERVED)


@given(streams())
def test_proto_rejects_oversize(stream: Stream) -> None:
    law_rejects_oversize(*stream, SERVED)


@given(streams())
def test_the_gate_answers_the_model_on_every_stream(stream: Stream) -> None:
    check_laws(*stream, SERVED)


SMALL_SERVED = frozenset({"x"})


@functools.cache
def small_scope(ids_kept: int) -> tuple[GateLimits, tuple[tuple[list[ModelFrame], list[bytes]], ...]]:
    """Every stream of up to 3 frames over 2 ids x 3 kinds (none, served, unserved) x 3 lengths (short, at, over)."""
    limit = 100
    limits = GateLimits(line=limit, head=64, ids_kept=ids_kept)
    domain: list[tuple[ModelFrame, bytes]] = []
    for frame_id, kind in itertools.product(["a", "b"], [None, "x", "y"]):
        assert shortest(frame_id, kind) < limit
        for length in (0, limit, limit + 1):
            domain.append(model_frame(frame_id, kind, length))
    assert {frame.length for frame, _ in domain} == {shortest("a", None), shortest("a", "x"), limit, limit + 1}
    every = tuple(
        ([frame for frame, _ in combo], [line for _, line in combo])
        for size in range(4)
        for combo in itertools.product(domain, repeat=size)
    )
    assert len(every) == 1 + 18 + 18**2 + 18**3
    return limits, every


IDS_KEPT_SCOPES = [1, 1024]  # 1: a repeated id is forgotten at once; 1024: every repeat is a duplicate


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_one_reply_each_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines in every:
        law_one_reply_each(limits, frames, lines, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_runs_only_accepted_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines in every:
        law_runs_only_accepted(limits, frames, lines, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_runs_every_accepted_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines in every:
        law_runs_every_accepted(limits, frames, lines, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_rejects_oversize_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines in every:
        law_rejects_oversize(limits, frames, lines, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_the_gate_answers_the_model_on_every_stream_of_a_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines in every:
        check_laws(limits, frames, lines, SMALL_SERVED)


# ---- the other rows of the gate's table -------------------------------------------------------------------


def test_a_used_id_is_refused_as_duplicate_before_its_type_is_looked_at() -> None:
    state = GateState()
    state, first = admit(state, Line(encode_frame("host_request", "h1", {"type": "echo"})[:-1]), SERVED)
    assert isinstance(first, Admission)
    for kind in ("echo", "nope", None):
        fields = {} if kind is None else {"type": kind}
        after, verdict = admit(state, Line(encode_frame("host_request", "h1", fields)[:-1]), SERVED)
        assert isinstance(verdict, Refusal)
        assert verdict.status == "duplicate"
        assert verdict.reply()["status"] == "duplicate"
        assert after == state


def test_other_events_answer_the_hosts_requests() -> None:
    for event in ("ready", "stdout", "stderr", "display", "result", "error", "done", "diagnostic"):
        line = encode_frame(event, "c1", {"text": "x"})[:-1]
        state, verdict = admit(GateState(), Line(line), SERVED)
        assert verdict == Event(event, "c1", {"event": event, "id": "c1", "text": "x"})
        assert state == GateState()


@pytest.mark.parametrize("event", ["stdout", "stderr", "display"])
def test_an_oversized_stream_or_display_event_is_dropped_with_a_diagnostic(event: str) -> None:
    limits = GateLimits(line=50, head=40)
    line = encode_frame(event, "c1", {"text": "y" * 200})[:-1]
    _, verdict = admit(GateState(), piece_of(line, limits), SERVED, limits)
    assert isinstance(verdict, Dropped)
    assert verdict.length == len(line)
    assert str(len(line)) in verdict.diagnostic


@pytest.mark.parametrize(
    ("piece", "reason"),
    [
        (Line(b"\xff\xfe{}"), FaultReason.NOT_UTF8),
        (Line(b"not json"), FaultReason.NOT_JSON),
        (Line(b""), FaultReason.NOT_JSON),
        (Line(b"[1, 2]"), FaultReason.NOT_PROTOCOL),
        (Line(b'{"event": "nonsense", "id": null}'), FaultReason.NOT_PROTOCOL),
        (Line(b'{"id": "x"}'), FaultReason.NOT_PROTOCOL),
        (Line(b'{"event": "host_request", "type": "echo"}'), FaultReason.NOT_PROTOCOL),
        (Line(b'{"event": "host_request", "id": true, "type": "echo"}'), FaultReason.NOT_PROTOCOL),
        (Line(b'{"event": "done", "id": 3}'), FaultReason.NOT_PROTOCOL),
        (Oversized(b"x" * 64, 10**9), FaultReason.OVERSIZED_HEADERLESS),
        (Oversized(b'{"event":"done","id":"c1","status":"ok"', 10**9), FaultReason.OVERSIZED_HEADERLESS),
        (Oversized(b'{"id":"h1","event":"host_request"', 10**9), FaultReason.OVERSIZED_HEADERLESS),
        (Oversized(b'{"event":"host_request","id":', 10**9), FaultReason.OVERSIZED_HEADERLESS),
    ],
)
def test_a_frame_the_host_cannot_answer_is_a_typed_fault(piece: Line | Oversized, reason: FaultReason) -> None:
    state, verdict = admit(GateState(), piece, SERVED, GateLimits(line=10**8))
    assert isinstance(verdict, ProtocolFault)
    assert verdict.reason is reason
    assert state == GateState()


@given(st.binary(max_size=300), st.integers(1, 200))
def test_any_bytes_get_a_verdict_never_an_exception(data: bytes, line_limit: int) -> None:
    limits = GateLimits(line=line_limit, head=32)
    _, verdict = admit(GateState(), piece_of(data, limits), SERVED, limits)
    assert isinstance(verdict, Admission | Refusal | Event | Dropped | ProtocolFault)


def test_gate_limits_refuse_nonsense() -> None:
    for bad in ({"line": 0}, {"head": -1}, {"ids_kept": True}):
        with pytest.raises(ValueError, match="GateLimits"):
            GateLimits(**bad)  # type: ignore[arg-type]
    assert GateLimits() == GateLimits(32 * 1024 * 1024, 4096, 1024)
