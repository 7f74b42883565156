"""Fuzz the kernel frame reader (docs/testing.md): random bytes and random frames, cut into random reads, give only
typed verdicts (the splitter and the gate, eukhe/core/gate.py); from a real kernel, only typed faults, and the host
(eukhe/kernel/manager.py) stays up: the next cell runs."""

from __future__ import annotations

import json
import random

import pytest

from eukhe.core.gate import Admission, Dropped, Event, GateLimits, ProtocolFault, Refusal
from eukhe.kernel.manager import KernelManager
from eukhe.kernel.splitter import FrameReader
from tests.fuzz.budget import afuzz_for, fuzz_for
from tests.real.kernel_support import run

EVENTS = ["host_request", "stdout", "stderr", "display", "result", "error", "done", "ready", "diagnostic", "x", ""]


def random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 2 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**63, 2**70, 1.5, rng.randint(-1000, 1000)])
    if kind == 3:
        return "".join(
            chr(rng.choice([rng.randint(32, 126), rng.randint(0x80, 0x2FFF), 0xFFFD]))
            for _ in range(rng.randint(0, 12))
        )
    if kind == 4:
        return rng.choice(["c1", "", "é", "x" * rng.randint(0, 300)])
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {str(random_value(rng, 2)): random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def random_frame(rng: random.Random) -> bytes:
    """A line that looks like a frame: an object with `event` and `id` first, sometimes broken."""
    fields: dict[str, object] = {"event": rng.choice(EVENTS), "id": rng.choice(["c1", "r1", 7, None, [], "dup"])}
    for name in rng.sample(["type", "cell", "params", "text", "status", "value", "extra"], rng.randint(0, 4)):
        fields[name] = random_value(rng)
    line = json.dumps(fields).encode()
    cut = rng.random()
    if cut < 0.1:
        line = line[: rng.randint(0, len(line))]  # torn
    elif cut < 0.15:
        line = bytes([rng.getrandbits(8)]) + line  # a stray byte first
    return line + b"\n"


def random_stream(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(1, 8)):
        if rng.random() < 0.5:
            parts.append(random_frame(rng))
        else:
            parts.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))) + rng.choice([b"\n", b""]))
    return b"".join(parts)


def test_the_frame_reader_gives_only_typed_verdicts_on_random_streams() -> None:
    def case(rng: random.Random) -> None:
        limits = GateLimits(line=rng.choice([8, 64, 400, 4096]), head=rng.choice([1, 16, 64]))
        reader = FrameReader(frozenset({"echo", "fs.read"}), limits)
        data = random_stream(rng)
        verdicts = []
        at = 0
        while at < len(data):  # random reads
            size = rng.randint(1, 64)
            verdicts.extend(reader.feed(data[at : at + size]))
            at += size
        assert all(isinstance(v, Admission | Refusal | Event | Dropped | ProtocolFault) for v in verdicts), verdicts
        faults = [i for i, v in enumerate(verdicts) if isinstance(v, ProtocolFault)]
        assert len(faults) <= 1, "after a fault only output events are read"
        ids = [v.frame_id for v in verdicts if isinstance(v, Admission)]
        assert len(ids) == len(set(ids)), "an id is admitted once"

    assert fuzz_for(case) > 10


@pytest.mark.real
def test_random_frames_from_a_real_kernel_give_typed_faults_and_the_host_stays_up() -> None:
    async def scenario() -> int:
        async with KernelManager() as km:

            async def case(rng: random.Random) -> None:
                blob = random_stream(rng)
                outcome = await km.run(f"import os, eukhe_kernel.runtime as rt\nos.write(rt.PROTOCOL_FD, {blob!r})\n1")
                assert outcome.status in ("ok", "fault", "error"), outcome
                healthy = await km.run("6 * 7")
                assert (healthy.status, healthy.result) == ("ok", "42"), healthy

            return await afuzz_for(case, at_least=3)

    assert run(scenario(), timeout=600) >= 3
