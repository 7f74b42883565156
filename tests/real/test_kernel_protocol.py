"""A real kernel under the host protocol (S3 "The protocol"): frame caps, duplicate ids, repair, fuzzed frames."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eukhe.core.gate import Admission, Dropped, Event, FaultReason, GateLimits, ProtocolFault, Refusal
from eukhe.kernel.manager import KernelManager
from eukhe.kernel.splitter import FrameReader
from tests.real.kernel_support import RawKernel, run, until

pytestmark = pytest.mark.real


def test_kernel_protocol_frame_caps() -> None:
    """Oversized request, unserved type, served one: one reply each, the session keeps working; then an oversized
    headerless line lands in repair and the next cell gets a fresh kernel."""
    calls: list[Any] = []

    async def echo(admission: Admission) -> Any:
        calls.append(admission.params)
        return {"echo": admission.params["n"]}

    async def scenario() -> None:
        limits = GateLimits(line=1024 * 1024)
        async with KernelManager(handlers={"echo": echo}, limits=limits) as km:
            outcome = await km.run(
                "from eukhe_kernel.api import host_request, HostRequestError\n"
                "answers = []\n"
                "for kind, size in [('echo', 2_000_000), ('nope', 10), ('echo', 10)]:\n"
                "    try:\n"
                "        answers.append(('ok', await host_request(kind, {'n': size, 'pad': 'x' * size})))\n"
                "    except HostRequestError as exc:\n"
                "        answers.append(('error', exc.code))\n"
                "answers"
            )
            assert outcome.status == "ok", outcome
            assert outcome.result == "[('error', 'over_limit'), ('error', 'unserved'), ('ok', {'echo': 10})]"
            assert [call["n"] for call in calls] == [10]
            pid = km.pid
            again = await km.run("len(answers)")
            assert (again.status, again.result, km.pid) == ("ok", "3", pid)
            assert km.faults == []

            broken = await km.run(
                "import os, time, eukhe_kernel.runtime as rt\n"
                "os.write(rt.PROTOCOL_FD, b'x' * 3_000_000 + b'\\n')\n"
                "time.sleep(60)"
            )
            assert broken.status == "fault"
            assert broken.error is not None
            assert broken.error.ename == "KernelProtocolError"
            assert "oversized_headerless" in broken.error.evalue
            assert [fault.reason for fault in km.faults] == [FaultReason.OVERSIZED_HEADERLESS]
            assert any("protocol repair" in line for line in km.diagnostics)
            fresh = await km.run("'answers' in globals()")
            assert (fresh.status, fresh.result) == ("ok", "False")
            assert km.pid != pid
            assert km.kernels_started == 2

    run(scenario())


def test_a_repeated_id_of_a_request_in_flight_gets_a_duplicate_reply_and_no_handler() -> None:
    calls: list[Any] = []

    async def scenario() -> None:
        release = asyncio.Event()

        async def slow(admission: Admission) -> Any:
            calls.append(admission.params)
            await release.wait()
            return f"handled {admission.params}"

        async with KernelManager(handlers={"slow": slow}) as km:
            cell = await km.execute(
                "import asyncio\n"
                "from eukhe_kernel.api import host_request\n"
                "first = asyncio.ensure_future(host_request('slow', 1, request_id='x'))\n"
                "await asyncio.sleep(0)\n"
                "second = asyncio.ensure_future(host_request('slow', 2, request_id='x'))\n"
                "await asyncio.gather(first, second)"
            )
            await until(lambda: any("duplicate" in line for line in km.diagnostics), what="the duplicate reply")
            await until(lambda: any("repeated host-request id" in line for line in km.diagnostics), what="drop")
            # The first request's handler is a task: it may take its first step after the duplicate is refused.
            await until(lambda: bool(calls), what="the first request's handler")
            assert calls == [1]
            assert not cell.done
            release.set()
            outcome = await cell.wait()
            assert outcome.status == "ok", outcome
            assert outcome.result == "['handled 1', 'handled 1']"
            assert calls == [1]

    run(scenario())


def test_host_duplicate_reply_does_not_settle_the_request_in_flight() -> None:
    async def scenario() -> None:
        kernel = await RawKernel.start()
        try:
            kernel.send(
                {
                    "request": "execute",
                    "id": "c1",
                    "code": "from eukhe_kernel.api import host_request\n"
                    "print(await host_request('anything', None, request_id='d1'))",
                }
            )
            request = await kernel.until_frame(lambda f: f["event"] == "host_request")
            assert (request["id"], request["type"], request["cell"]) == ("d1", "anything", "c1")
            kernel.send({"request": "host_reply", "id": "d1", "status": "duplicate", "error": {"code": "duplicate"}})
            notice = await kernel.until_frame(lambda f: f["event"] != "stdout" or f["id"] is None)
            assert notice["event"] == "diagnostic", notice
            assert "still waits" in notice["message"]
            kernel.send({"request": "host_reply", "id": "d1", "status": "ok", "result": "the handler's reply"})
            done = await kernel.until_frame(lambda f: f["event"] == "done")
            assert done == {"event": "done", "id": "c1", "status": "ok"}
            printed = "".join(f["text"] for f in kernel.frames if f["event"] == "stdout" and f["id"] == "c1")
            assert printed == "the handler's reply\n"
        finally:
            await kernel.close()

    run(scenario())


@given(st.lists(st.binary(min_size=0, max_size=600), max_size=6), st.randoms(use_true_random=False))
def test_the_host_frame_reader_takes_random_bytes_with_typed_faults_only(
    chunks: list[bytes], rng: random.Random
) -> None:
    limits = GateLimits(line=rng.randint(1, 400), head=rng.randint(1, 64))
    reader = FrameReader(frozenset({"echo"}), limits)
    verdicts = []
    for chunk in chunks:
        verdicts.extend(reader.feed(chunk))
    assert all(isinstance(v, Admission | Refusal | Event | Dropped | ProtocolFault) for v in verdicts)
    faults = [index for index, v in enumerate(verdicts) if isinstance(v, ProtocolFault)]
    assert faults in ([], [len(verdicts) - 1])
    if faults:
        assert reader.feed(b'{"event":"done","id":"c1"}\n') == []


def test_random_bytes_from_a_real_kernel_never_take_the_host_down() -> None:
    """A cell writes random bytes on the protocol fd: the host repairs (or ignores a valid frame), never falls."""
    rng = random.Random(11)
    blobs = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000))) + b"\n" for _ in range(6)]
    blobs.append(b"\x00\xff garbage without a newline, then one\n")

    async def scenario() -> None:
        async with KernelManager() as km:
            for index, blob in enumerate(blobs):
                outcome = await km.run(
                    "import os, eukhe_kernel.runtime as rt\n"
                    f"os.write(rt.PROTOCOL_FD, {blob!r})\n"
                    "import time\n"
                    "time.sleep(0.2)\n"
                    f"{index}"
                )
                assert outcome.status in ("ok", "fault"), outcome
                healthy = await km.run("6 * 7")
                assert (healthy.status, healthy.result) == ("ok", "42")
            assert km.faults, "random bytes should have broken at least one frame"

    run(scenario(), timeout=120)


@pytest.fixture(scope="module")
def raw_kernel() -> Iterator[tuple[asyncio.AbstractEventLoop, RawKernel]]:
    """One raw kernel on its own loop, shared by the fuzz examples."""
    loop = asyncio.new_event_loop()
    kernel = loop.run_until_complete(RawKernel.start())
    yield loop, kernel
    loop.run_until_complete(kernel.close())
    loop.close()


@settings(max_examples=25)
@given(data=st.binary(max_size=200))
def test_fuzzed_request_lines_do_not_stop_the_kernel(
    raw_kernel: tuple[asyncio.AbstractEventLoop, RawKernel], data: bytes
) -> None:
    """The stub's side: any line it reads gets at most a diagnostic; the next request is still served."""
    loop, kernel = raw_kernel

    async def scenario() -> None:
        assert kernel.process.stdin is not None
        kernel.process.stdin.write(data.replace(b"\n", b" ") + b"\n")
        kernel.send({"request": "execute", "id": "after", "code": "2"})
        await kernel.until_frame(lambda f: f["event"] == "done" and f["id"] == "after")

    loop.run_until_complete(asyncio.wait_for(scenario(), 20))


def test_a_long_host_request_does_not_hold_back_a_short_one() -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def slow(admission: Admission) -> str:
            await release.wait()
            return "slow"

        async def fast(admission: Admission) -> str:
            return "fast"

        async with KernelManager(handlers={"slow": slow, "fast": fast}) as km:
            cell = await km.execute(
                "import asyncio\nfrom eukhe_kernel.api import host_request\norder = []\n"
                "async def ask(kind):\n    order.append(await host_request(kind))\n"
                "slow_task = asyncio.ensure_future(ask('slow'))\n"
                "await ask('fast')\nprint(order)\nawait slow_task\norder"
            )
            await until(lambda: b"['fast']" in cell.output.snapshot().text, what="the fast reply first")
            release.set()
            outcome = await cell.wait()
            assert outcome.result == "['fast', 'slow']"

    run(scenario())


def test_a_handler_error_is_its_one_reply() -> None:
    async def broken(admission: Admission) -> Any:
        raise LookupError("nothing there")

    async def unencodable(admission: Admission) -> Any:
        return float("nan")

    async def scenario() -> None:
        async with KernelManager(handlers={"broken": broken, "nan": unencodable}) as km:
            outcome = await km.run(
                "from eukhe_kernel.api import host_request, HostRequestError\nout = []\n"
                "for kind in ('broken', 'nan'):\n"
                "    try:\n        await host_request(kind)\n"
                "    except HostRequestError as exc:\n        out.append((exc.code, exc.message))\nout"
            )
            assert outcome.result == (
                "[('handler_error', 'LookupError: nothing there'), "
                "('unencodable', \"the handler's result is not JSON: the handler's result holds nan, which strict "
                'JSON cannot carry")]'
            )

    run(scenario())


def test_a_faulted_cells_answer_carries_the_output_it_wrote_before_the_fault() -> None:
    """The cell's print is still pending in the stub's writer (flushed by time) when a raw line breaks the protocol:
    the reader salvages the cell's output frames until the kernel is gone (the stub flushes what it holds when its
    stdin closes), so the fault does not lose the output."""

    async def scenario() -> None:
        async with KernelManager() as km:
            broken = await km.run(
                "import os, time, eukhe_kernel.runtime as rt\n"
                "print('before the fault')\n"
                "os.write(rt.PROTOCOL_FD, b'garbage\\n')\n"
                "time.sleep(60)"
            )
            assert broken.status == "fault"
            assert broken.output.text == b"before the fault\n"
            assert [fault.reason for fault in km.faults] == [FaultReason.NOT_JSON]
            fresh = await km.run("'still works'")
            assert (fresh.status, fresh.result) == ("ok", "'still works'")

    run(scenario())
