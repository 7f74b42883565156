"""Tie (S3 "The protocol"): the host's real frame reading equals the spec's model, reply by reply.

200 generated streams of host-request frames (ids, lengths, kinds), written as the runtime writes them (with
stream events between them), cut into reads of random sizes, go through the real `FrameReader` (splitter + gate);
its transcript (the reply per frame, the frames served) must equal the model's `serve` on the abstract frames.
The streams reach every rule: served, oversized, unserved kind, no kind, used id, a frame exactly at the limit.
"""

from __future__ import annotations

import random

from eukhe.core.gate import (
    DEFAULT_LIMITS,
    Admission,
    Event,
    GateLimits,
    Refusal,
    Verdict,
)
from eukhe.kernel.splitter import FrameReader
from eukhe_kernel.protocol import encode_frame
from tests.gate_support import ModelFrame, model_frame, reply_of, serve

SERVED = frozenset({"fs.read", "fs.write", "rlm.run"})
KINDS: list[str | None] = ["fs.read", "fs.write", "rlm.run", "fs.nope", "shell", None]


def transcript_lines(replies: list[str], served: list[str]) -> list[str]:
    return [*replies, "served " + " ".join(served)]


def real_transcript(data: bytes, reads: list[int], limits: GateLimits) -> tuple[list[str], list[Verdict]]:
    reader = FrameReader(SERVED, limits)
    verdicts: list[Verdict] = []
    start = 0
    for size in reads:
        verdicts.extend(reader.feed(data[start : start + size]))
        start += size
    assert start == len(data)
    replies = []
    ran = []
    for verdict in verdicts:
        reply = reply_of(verdict)
        if reply is not None:
            replies.append(f"reply {reply.id} {reply.status} {reply.reason or ''}".rstrip())
        if isinstance(verdict, Admission):
            ran.append(str(verdict.id))
    return transcript_lines(replies, ran), verdicts


def model_transcript(frames: list[ModelFrame], limits: GateLimits) -> list[str]:
    model = serve(frames, SERVED, limits)
    replies = [f"reply {reply.id} {reply.status} {reply.reason or ''}".rstrip() for reply in model.replies]
    return transcript_lines(replies, [str(frame_id) for frame_id in model.served])


def random_reads(rng: random.Random, total: int) -> list[int]:
    reads = []
    left = total
    while left:
        size = min(left, rng.choice([1, 2, 7, rng.randint(1, 64), rng.randint(1, 4096), rng.randint(1, total)]))
        reads.append(size)
        left -= size
    return reads


def generate(rng: random.Random) -> tuple[GateLimits, list[ModelFrame], bytes, int]:
    limit = rng.randint(120, 400)
    limits = GateLimits(line=limit, head=rng.randint(48, 256), ids_kept=rng.randint(1, 8))
    frames: list[ModelFrame] = []
    chunks: list[bytes] = []
    events = 0
    next_id = 0
    for _ in range(rng.randint(1, 24)):
        if rng.random() < 0.25:  # a stream event between requests: no reply
            chunks.append(encode_frame(rng.choice(["stdout", "stderr"]), "c1", {"text": "o" * rng.randint(0, 50)}))
            events += 1
        if frames and rng.random() < 0.15:
            frame_id: str | int = rng.choice(frames).id  # a repeated id
        else:
            next_id += 1
            frame_id = f"h{next_id}" if rng.random() < 0.7 else next_id
        kind = rng.choice(KINDS)
        length = rng.choice(
            [rng.randint(0, limit), limit, limit, limit + 1, rng.randint(limit + 1, 3 * limit), 20 * limit]
        )
        frame, line = model_frame(frame_id, kind, length)
        frames.append(frame)
        chunks.append(line + b"\n")
    return limits, frames, b"".join(chunks), events


def test_the_frame_gate_equals_the_model() -> None:
    rng = random.Random(20261129)
    reached = {"served": 0, "oversized": 0, "unserved": 0, "missing_type": 0, "duplicate": 0, "at_limit_served": 0}
    for _ in range(200):
        limits, frames, data, events = generate(rng)
        real, verdicts = real_transcript(data, random_reads(rng, len(data)), limits)
        expected = model_transcript(frames, limits)
        assert real == expected
        assert sum(isinstance(verdict, Event) for verdict in verdicts) == events
        for frame, verdict in zip(frames, [v for v in verdicts if not isinstance(v, Event)], strict=True):
            if isinstance(verdict, Admission):
                reached["served"] += 1
                reached["at_limit_served"] += frame.length == limits.line
            elif isinstance(verdict, Refusal):
                key = {"over_limit": "oversized"}.get(verdict.reason.value, verdict.reason.value)
                reached[key] += 1
    assert all(reached.values()), reached


def test_the_frame_gate_equals_the_model_at_the_real_limit() -> None:
    """One stream at the real 32 MiB limit: exactly at it is served, one byte over is refused, then work goes on."""
    rng = random.Random(5)
    limit = DEFAULT_LIMITS.line
    frames_lines = [
        model_frame("at", "fs.read", limit),
        model_frame("over", "fs.read", limit + 1),
        model_frame("after", "fs.write", 0),
    ]
    frames = [frame for frame, _ in frames_lines]
    assert [frame.length for frame in frames[:2]] == [limit, limit + 1]
    data = b"".join(line + b"\n" for _, line in frames_lines)
    reads = []
    left = len(data)
    while left:
        reads.append(min(left, rng.randint(1, 1 << 20)))
        left -= reads[-1]
    real, _ = real_transcript(data, reads, DEFAULT_LIMITS)
    assert real == model_transcript(frames, DEFAULT_LIMITS)
    assert real == ["reply at ok", "reply over error over_limit", "reply after ok", "served at after"]
