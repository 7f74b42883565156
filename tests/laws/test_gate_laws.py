"""Laws of the frame gate (S3 "The protocol"; laws/sandbox: proto_*), over free frames and a small scope whole.

Each frame is a host request written as the runtime writes it, one line with its newline. The frames go as bytes,
cut into reads of any size (at random, and at the edges a splitter can get wrong: just before or after a newline,
at the line limit, one past it), through the host's real reading of kernel stdout, the `FrameReader` the kernel
manager feeds (the one line splitter, then the gate). It must give exactly one reply per frame, run exactly the
accepted frames, refuse every oversized one without effect, and agree with the spec's model `serve` reply by reply.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.gate import (
    Admission,
    Dropped,
    Event,
    FaultReason,
    FrameId,
    GateLimits,
    GateState,
    Line,
    Oversized,
    ProtocolFault,
    Refusal,
    RefusalReason,
    admit,
    piece_of,
)
from eukhe.kernel.splitter import FrameReader
from eukhe_kernel.protocol import encode_frame
from tests.gate_support import ModelFrame, ModelReply, Transcript, model_frame, reply_of, serve, shortest

SERVED = frozenset({"fs.read", "echo"})
KINDS = [None, "fs.read", "echo", "nope", ""]


def stream_bytes(lines: list[bytes]) -> bytes:
    """The frames as the kernel writes them to stdout: each line and its newline."""
    return b"".join(line + b"\n" for line in lines)


def edges(lines: list[bytes], limits: GateLimits) -> Iterator[int]:
    """Offsets where a splitter can go wrong: each line's start + 1, just before and just after its newline, and its
    start + the head, the limit, the limit + 1."""
    start = 0
    for line in lines:
        end = start + len(line) + 1
        for offset in (start + 1, end - 1, end, start + limits.head, start + limits.line, start + limits.line + 1):
            if start < offset <= end:
                yield offset
        start = end


def reads_at(cuts: set[int], total: int) -> list[int]:
    """The sizes of the reads that end at `cuts` (and at the end): never an empty read."""
    bounds = [0, *sorted(cut for cut in cuts if 0 < cut < total), total]
    return [b - a for a, b in itertools.pairwise(bounds) if b > a]


def remembered(ids: list[FrameId], limits: GateLimits) -> GateState:
    """The gate state the spec says holds after these accepted ids: the last `ids_kept` of them."""
    order = tuple(ids[-limits.ids_kept :])
    return GateState(order, frozenset(order))


def gate_transcript(
    lines: list[bytes], reads: list[int], served: frozenset[str], limits: GateLimits
) -> tuple[Transcript, list[tuple[int, GateState]]]:
    """Feed the frames' bytes, read by read, to a real `FrameReader`: its transcript, and after each read the number
    of replies so far and the gate's state. Every verdict on a host request must be a reply."""
    data = stream_bytes(lines)
    assert sum(reads) == len(data) and all(size > 0 for size in reads)
    reader = FrameReader(served, limits)
    replies: list[ModelReply] = []
    ran: list[FrameId] = []
    after_reads: list[tuple[int, GateState]] = []
    position = 0
    for size in reads:
        for verdict in reader.feed(data[position : position + size]):
            reply = reply_of(verdict)
            assert reply is not None, f"a host request got no reply: {verdict}"
            replies.append(reply)
            if isinstance(verdict, Admission):
                ran.append(verdict.id)
        position += size
        after_reads.append((len(replies), reader.state))
    return Transcript(tuple(replies), tuple(ran)), after_reads


@st.composite
def reads_of(draw: st.DrawFn, lines: list[bytes], limits: GateLimits) -> list[int]:
    """Reads of random sizes over the frames' bytes: cuts anywhere and at the edges, or byte by byte, or one read."""
    total = len(stream_bytes(lines))
    how = draw(st.sampled_from(["cuts", "cuts", "cuts", "bytes", "whole"]))
    if how == "bytes":
        return [1] * total
    if how == "whole" or total == 0:
        return reads_at(set(), total)
    cuts = set(draw(st.lists(st.integers(0, total), max_size=12)))
    at_edges = list(edges(lines, limits))
    if at_edges:
        cuts.update(draw(st.lists(st.sampled_from(at_edges), max_size=3 * len(lines))))
    return reads_at(cuts, total)


Stream = tuple[GateLimits, list[ModelFrame], list[bytes], list[int]]


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    """Limits around a frame's size, and frames with repeated ids, every kind and lengths around the limit, cut into
    reads."""
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
    return limits, frames, lines, draw(reads_of(lines, limits))


def check_laws(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], reads: list[int], served: frozenset[str]
) -> None:
    """All four proto laws at once, reply by reply, and the reader's transcript equal to the model's."""
    law_one_reply_each(limits, frames, lines, reads, served)
    law_runs_only_accepted(limits, frames, lines, reads, served)
    law_runs_every_accepted(limits, frames, lines, reads, served)
    law_rejects_oversize(limits, frames, lines, reads, served)
    real, _ = gate_transcript(lines, reads, served, limits)
    assert real == serve(frames, served, limits)


def law_one_reply_each(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], reads: list[int], served: frozenset[str]
) -> None:
    """proto_one_reply_each: every frame gets exactly one reply, in the frames' order (reader and model)."""
    real, _ = gate_transcript(lines, reads, served, limits)
    assert [reply.id for reply in real.replies] == [frame.id for frame in frames]
    assert [reply.id for reply in serve(frames, served, limits).replies] == [frame.id for frame in frames]


def law_runs_only_accepted(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], reads: list[int], served: frozenset[str]
) -> None:
    """proto_runs_only_accepted: a handler runs only for a frame within the limit, of a served kind, unseen id; and
    exactly as the model runs them."""
    real, _ = gate_transcript(lines, reads, served, limits)
    assert len(real.replies) == len(frames)
    seen: list[FrameId] = []
    for frame, reply in zip(frames, real.replies, strict=True):
        if reply.status == "ok":
            assert frame.length <= limits.line
            assert frame.kind in served
            assert frame.id not in seen[-limits.ids_kept :]
            seen.append(frame.id)
    assert list(real.served) == seen
    assert real.served == serve(frames, served, limits).served


def law_runs_every_accepted(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], reads: list[int], served: frozenset[str]
) -> None:
    """proto_runs_every_accepted: every such frame reaches its handler, in order, as in the model."""
    real, _ = gate_transcript(lines, reads, served, limits)
    seen: list[FrameId] = []
    for frame in frames:
        if frame.length <= limits.line and frame.kind in served and frame.id not in seen[-limits.ids_kept :]:
            seen.append(frame.id)
    assert list(real.served) == seen
    assert real.served == serve(frames, served, limits).served


def law_rejects_oversize(
    limits: GateLimits, frames: list[ModelFrame], lines: list[bytes], reads: list[int], served: frozenset[str]
) -> None:
    """proto_rejects_oversize: over the limit, an error reply and no effect on the gate: after every read, the gate
    holds exactly the ids of the frames accepted so far (an oversized frame's id never among them), as the model."""
    real, after_reads = gate_transcript(lines, reads, served, limits)
    model = serve(frames, served, limits)
    assert len(real.replies) == len(frames)
    for index, frame in enumerate(frames):
        if frame.length > limits.line:
            assert real.replies[index] == ModelReply(frame.id, "error", RefusalReason.OVER_LIMIT.value)
            assert model.replies[index] == real.replies[index]
    for answered, state in after_reads:
        accepted = [reply.id for reply in real.replies[:answered] if reply.status == "ok"]
        assert state == remembered(accepted, limits)


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
SmallStream = tuple[list[ModelFrame], list[bytes], list[int]]


@functools.cache
def small_scope(ids_kept: int) -> tuple[GateLimits, tuple[SmallStream, ...]]:
    """Every stream of up to 3 frames over 2 ids x 3 kinds (none, served, unserved) x 3 lengths (short, at, over),
    each read twice: in one read, and in reads cut at every edge (before and after each newline, at the limit, one
    past it, after the first byte of each line)."""
    limit = 100
    limits = GateLimits(line=limit, head=64, ids_kept=ids_kept)
    domain: list[tuple[ModelFrame, bytes]] = []
    for frame_id, kind in itertools.product(["a", "b"], [None, "x", "y"]):
        assert shortest(frame_id, kind) < limit
        for length in (0, limit, limit + 1):
            domain.append(model_frame(frame_id, kind, length))
    assert {frame.length for frame, _ in domain} == {shortest("a", None), shortest("a", "x"), limit, limit + 1}
    every: list[SmallStream] = []
    for size in range(4):
        for combo in itertools.product(domain, repeat=size):
            frames, lines = [frame for frame, _ in combo], [line for _, line in combo]
            total = len(stream_bytes(lines))
            every.append((frames, lines, reads_at(set(), total)))
            every.append((frames, lines, reads_at(set(edges(lines, limits)), total)))
    assert len(every) == 2 * (1 + 18 + 18**2 + 18**3)
    return limits, tuple(every)


IDS_KEPT_SCOPES = [1, 1024]  # 1: a repeated id is forgotten at once; 1024: every repeat is a duplicate


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_one_reply_each_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines, reads in every:
        law_one_reply_each(limits, frames, lines, reads, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_runs_only_accepted_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines, reads in every:
        law_runs_only_accepted(limits, frames, lines, reads, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_runs_every_accepted_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines, reads in every:
        law_runs_every_accepted(limits, frames, lines, reads, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_proto_rejects_oversize_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines, reads in every:
        law_rejects_oversize(limits, frames, lines, reads, SMALL_SERVED)


@pytest.mark.parametrize("ids_kept", IDS_KEPT_SCOPES)
def test_the_gate_answers_the_model_on_every_stream_of_a_small_scope(ids_kept: int) -> None:
    limits, every = small_scope(ids_kept)
    for frames, lines, reads in every:
        check_laws(limits, frames, lines, reads, SMALL_SERVED)


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
