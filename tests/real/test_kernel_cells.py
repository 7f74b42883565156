"""Cells on a real kernel: namespace, top-level await, output, interrupts, payload caps, lifetime and kill."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from eukhe.core.bound import DEFAULT_TRUNCATION, Off, On
from eukhe.kernel.launch import OWNER_PID_VARIABLE, KernelLaunch, kernel_launch
from eukhe.kernel.manager import KernelManager
from tests.real.kernel_support import RawKernel, process_gone, run, until, until_output

pytestmark = pytest.mark.real


def test_cells_share_one_namespace_with_top_level_await_and_background_tasks() -> None:
    async def scenario() -> None:
        async with KernelManager(truncation=Off()) as km:
            first = await km.run(
                "import asyncio\n"
                "ticks = 0\n"
                "async def tick():\n"
                "    global ticks\n"
                "    while True:\n"
                "        ticks += 1\n"
                "        await asyncio.sleep(0.001)\n"
                "task = asyncio.ensure_future(tick())\n"
                "await asyncio.sleep(0.01)\n"
                "print('first', __name__)"
            )
            assert (first.status, first.output.text, first.result) == ("ok", b"first __main__\n", None)
            seen = await km.run("before = ticks\nawait asyncio.sleep(0.05)\n(ticks > before, task.done())")
            assert seen.result == "(True, False)"
            error = await km.run("def f():\n    return 1 / 0\nf()")
            assert error.status == "error"
            assert error.error is not None
            assert (error.error.ename, error.error.evalue) == ("ZeroDivisionError", "division by zero")
            trace = "".join(error.error.traceback)
            assert "<cell-" in trace
            assert "eukhe_kernel" not in trace
            assert "return 1 / 0" in trace
            syntax = await km.run("def (")
            assert syntax.error is not None
            assert syntax.error.ename == "SyntaxError"
            value = await km.run("_ = None\nclass P:\n    def __repr__(self):\n        return 'P!'\nP()")
            assert value.result == "P!"
            none = await km.run("None")
            assert none.result is None

    run(scenario())


def test_a_cell_that_is_one_expression_runs_like_any_other_cell() -> None:
    """One-expression cells take the stub's eval-mode compile; results, await, errors and `_` are as for any cell."""

    async def scenario() -> None:
        async with KernelManager(truncation=Off()) as km:
            assert (await km.run("1+1")).result == "2"
            assert (await km.run("_ * 10  # a comment")).result == "20"
            assert (await km.run("(\n  3,\n  4,\n)\n")).result == "(3, 4)"
            assert (await km.run("await __import__('asyncio').sleep(0, 'slept')")).result == "'slept'"
            assert (await km.run("'a\\tb'")).result == "'a\\tb'"
            assert (await km.run("x = 5")).result is None
            assert (await km.run("x")).result == "5"
            error = await km.run("\n1 / 0")
            assert error.error is not None
            assert error.error.ename == "ZeroDivisionError"
            assert "line 2" in "".join(error.error.traceback)
            syntax = await km.run("1 +")
            assert syntax.error is not None
            assert syntax.error.ename == "SyntaxError"
            assert (await km.run("  1")).error is not None

    run(scenario())


def test_every_byte_a_cell_wrote_precedes_its_done() -> None:
    """Python-level writes (tagged), raw fd writes and a subprocess (untagged, pumped) all land in the cell."""
    code = (
        "import os, sys, subprocess\n"
        "for i in range(2000):\n"
        "    print('line', i)\n"
        "os.write(1, b'raw-out\\n')\n"
        "os.write(2, b'raw-err\\n')\n"
        "subprocess.run(['echo', 'from-a-child'])\n"
        "sys.stderr.write('err-python\\n')\n"
        "sys.stdout.buffer.write(b'\\xff-bytes\\n')\n"
        "print(bash('echo via-bash').stdout, end='')\n"
        "print('last')"
    )

    async def scenario() -> None:
        async with KernelManager(truncation=Off()) as km:
            for _ in range(3):
                outcome = await km.run(code)
                text = outcome.output.text
                assert outcome.status == "ok", outcome
                lines = text.split(b"\n")
                assert [line for line in lines if line.startswith(b"line")] == [
                    f"line {i}".encode() for i in range(2000)
                ]
                for marker in (b"raw-out", b"raw-err", b"from-a-child", b"err-python", b"\xff-bytes", b"via-bash"):
                    assert marker + b"\n" in text
                # Python-level writes keep their order; raw fd writes come through a pump of their own, so under
                # load they may land after a later Python-level write, but always before the cell's done.
                tagged = [line for line in lines if line in (b"err-python", b"\xff-bytes", b"via-bash", b"last")]
                assert tagged == [b"err-python", b"\xff-bytes", b"via-bash", b"last"]
                assert outcome.output.bytes_dropped == 0

    run(scenario())


def test_many_small_prints_are_merged_into_few_frames() -> None:
    async def scenario() -> None:
        kernel = await RawKernel.start()
        try:
            kernel.send({"request": "execute", "id": "c1", "code": "for i in range(20000):\n    print(i)"})
            await kernel.until_frame(lambda f: f["event"] == "done")
            streams = [f for f in kernel.frames if f["event"] == "stdout"]
            assert "".join(f["text"] for f in streams) == "".join(f"{i}\n" for i in range(20000))
            assert len(streams) < 200, len(streams)
            kernel.send({"request": "execute", "id": "c2", "code": "print('x' * 3_000_000)"})
            await kernel.until_frame(lambda f: f["event"] == "done" and f["id"] == "c2")
            big = [f for f in kernel.frames if f["event"] == "stdout" and f["id"] == "c2"]
            assert "".join(f["text"] for f in big) == "x" * 3_000_000 + "\n"
            assert max(len(f["text"]) for f in big) <= 256 * 1024
        finally:
            await kernel.close()

    run(scenario())


def test_interrupt_a_busy_sync_loop() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            cell = await km.execute("print('started')\nwhile True:\n    pass")
            await until_output(cell, b"started")
            pid = km.pid
            assert await km.interrupt()
            outcome = await cell.wait()
            assert outcome.status == "interrupted"
            assert outcome.error is not None
            assert outcome.error.ename == "KeyboardInterrupt"
            after = await km.run("1 + 1")
            assert (after.result, km.pid) == ("2", pid)
            blocked = await km.execute("import time\nprint('started')\ntime.sleep(3600)")
            await until_output(blocked, b"started")
            assert await km.interrupt(blocked.id)
            assert (await blocked.wait()).status == "interrupted"

    run(scenario())


def test_an_interrupt_whose_first_sigint_goes_unheard_still_ends_the_cell() -> None:
    """A SIGINT that lands just before a blocking call wakes nothing; the stub sends it again until it is heard.

    The cell swallows the first SIGINT with a handler of its own (as the race does), then puts the kernel's back.
    """

    async def scenario() -> None:
        async with KernelManager() as km:
            cell = await km.execute(
                "import signal, time\n"
                "kernels = signal.getsignal(signal.SIGINT)\n"
                "signal.signal(signal.SIGINT, lambda *_: signal.signal(signal.SIGINT, kernels))\n"
                "print('started')\n"
                "time.sleep(3600)"
            )
            await until_output(cell, b"started")
            assert await km.interrupt()
            outcome = await cell.wait()
            assert outcome.status == "interrupted"
            assert outcome.error is not None and outcome.error.ename == "KeyboardInterrupt"

    run(scenario())


def test_interrupt_a_cell_awaiting_keeps_the_background_tasks() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            await km.run(
                "import asyncio\nbeats = 0\nasync def beat():\n    global beats\n    while True:\n"
                "        beats += 1\n        await asyncio.sleep(0.001)\nbg = asyncio.ensure_future(beat())"
            )
            cell = await km.execute("print('started')\nawait asyncio.sleep(3600)")
            await until_output(cell, b"started")
            assert await km.interrupt()
            outcome = await cell.wait()
            assert outcome.status == "interrupted"
            assert outcome.error is not None
            assert outcome.error.ename == "KeyboardInterrupt"
            alive = await km.run("b = beats\nawait asyncio.sleep(0.05)\n(beats > b, bg.done())")
            assert alive.result == "(True, False)"

    run(scenario())


def test_interrupt_a_cell_not_yet_started() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            first = await km.execute("print('started')\nimport time\ntime.sleep(3600)")
            second = await km.execute("ran_second = True")
            await until_output(first, b"started")
            assert await km.interrupt(second.id)
            assert await km.interrupt(first.id)
            assert (await first.wait()).status == "interrupted"
            skipped = await second.wait()
            assert skipped.status == "interrupted"
            assert skipped.error is not None
            assert skipped.error.evalue == "interrupted before it started"
            check = await km.run("'ran_second' in globals()")
            assert check.result == "False"
            assert not await km.interrupt("c-unknown")

    run(scenario())


def test_a_kernel_started_with_sigint_ignored_is_still_interruptible() -> None:
    ignored = subprocess.run(
        [
            "sh",
            "-c",
            'trap "" INT; exec "$0" -c "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"',
            sys.executable,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ignored.stdout.strip() == "True"

    def launch() -> KernelLaunch:
        base = kernel_launch()
        return KernelLaunch(("sh", "-c", 'trap "" INT; exec "$0" "$@"', *base.argv), base.env)

    async def scenario() -> None:
        async with KernelManager(launch=launch) as km:
            cell = await km.execute("print('started')\nwhile True:\n    pass")
            await until_output(cell, b"started")
            assert await km.interrupt()
            assert (await cell.wait()).status == "interrupted"
            outside = await km.execute("print('started')\nwhile True:\n    pass")
            await until_output(outside, b"started")
            assert km.pid is not None
            os.kill(km.pid, signal.SIGINT)  # a plain SIGINT from outside works too
            assert (await outside.wait()).status == "interrupted"

    run(scenario())


def test_a_payload_over_16_mib_fails_the_cell_before_any_frame() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            outcome = await km.run("display('x' * (17 * 1024 * 1024))")
            assert outcome.status == "error"
            assert outcome.error is not None
            assert outcome.error.ename == "PayloadTooLargeError"
            assert "16 MiB" in outcome.error.evalue
            assert outcome.displays == ()
            request = await km.run(
                "from eukhe_kernel.api import host_request\nawait host_request('x', 'y' * (17 * 1024 * 1024))"
            )
            assert request.error is not None
            assert request.error.ename == "PayloadTooLargeError"
            shown = await km.run("display([1, 2])")
            assert (shown.displays, shown.output.text) == ((), b"[1, 2]\n")  # no image: its repr in the output
            assert km.diagnostics == []
            assert km.kernels_started == 1

    run(scenario())


def test_a_kernel_that_dies_mid_cell_ends_it_and_the_next_cell_gets_a_fresh_kernel() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            await km.run("x = 1")
            pid = km.pid
            died = await km.run("print('bye')\nimport os\nos.kill(os.getpid(), 9)")
            assert died.status == "died"
            assert died.error is not None
            assert died.error.ename == "KernelDiedError"
            assert "killed by signal 9" in died.error.evalue
            assert "fresh kernel" in died.error.evalue
            fresh = await km.run("'x' in globals()")
            assert (fresh.status, fresh.result) == ("ok", "False")
            assert km.pid != pid

    run(scenario())


def test_kill_closes_stdin_and_the_stub_kills_its_bash_process_groups() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            started = await km.run("p = bash_background('sleep 300')\nr = bash('echo sync-ok')\n(p.pid, r.stdout)")
            assert started.result is not None
            child = int(started.result.split(",")[0].strip("("))
            assert "sync-ok" in started.result
            assert not process_gone(child)
            cell = await km.execute("print('started')\nimport time\ntime.sleep(3600)")
            await until_output(cell, b"started")
            kernel_pid = km.pid
            assert kernel_pid is not None
            await km.kill()
            outcome = await cell.wait()
            assert outcome.status == "killed"
            assert outcome.error is not None
            assert outcome.error.ename == "KernelKilledError"
            await until(lambda: process_gone(child), what="the bash() child to die")
            assert process_gone(kernel_pid)

    run(scenario())


def test_the_local_kernel_exits_when_its_owner_dies() -> None:
    owner = subprocess.Popen(["sleep", "300"])

    async def scenario() -> None:
        kernel = await RawKernel.start({OWNER_PID_VARIABLE: str(owner.pid)})
        try:
            owner.kill()
            owner.wait()
            await asyncio.wait_for(kernel.process.wait(), 10)
        finally:
            await kernel.close()

    try:
        run(scenario())
    finally:
        owner.kill()
        owner.wait()


def test_stdin_eof_shuts_the_stub_down() -> None:
    async def scenario() -> None:
        kernel = await RawKernel.start()
        try:
            kernel.send({"request": "execute", "id": "c1", "code": "p = bash_background('sleep 300'); print(p.pid)"})
            frame = await kernel.until_frame(lambda f: f["event"] == "stdout")
            child = int(frame["text"])
        except BaseException:
            await kernel.close()  # the test failed before its own close: the kernel goes with it
            raise
        start = time.monotonic()
        await kernel.close()
        assert time.monotonic() - start < 5
        await until(lambda: process_gone(child), what="the bash() child to die")

    run(scenario())


@pytest.mark.parametrize("owner", ["stdin", "host"])
def test_stdin_eof_ends_a_kernel_whose_sync_cell_holds_the_loop(owner: str) -> None:
    """S3 sandbox 7: a wrapped kernel (its owner is stdin) whose cell never yields the loop still ends at stdin EOF,
    with its `bash()` children: the reader thread shuts it down (EOF_GRACE_S, 30 s, only backs that up)."""

    async def scenario() -> None:
        env = {"EUKHE_KERNEL_OWNER": "stdin"} if owner == "stdin" else {}
        kernel = await RawKernel.start(env)
        try:
            code = "import time\np = bash_background('sleep 300'); print(p.pid, flush=True)\ntime.sleep(600)"
            kernel.send({"request": "execute", "id": "c1", "code": code})
            frame = await kernel.until_frame(lambda f: f["event"] == "stdout")
            child = int(frame["text"])
        except BaseException:
            await kernel.close()  # the test failed before its own close: the kernel goes with it
            raise
        await kernel.close()  # closes stdin, waits 10 s for the exit, else kills the group (-9)
        assert kernel.process.returncode == 0  # it shut itself down, well inside the 30-s backstop
        await until(lambda: process_gone(child), what="the bash() child to die")

    run(scenario())


@pytest.mark.slow
def test_a_gib_of_output_from_a_cell_is_bounded_with_kept_and_dropped_exact() -> None:
    total = 1 << 30

    async def scenario() -> None:
        async with KernelManager(truncation=DEFAULT_TRUNCATION) as km:
            outcome = await km.run(
                "import os, sys\n"
                "line = 'y' * 1023 + '\\n'\n"
                "block = line * 1024\n"
                "for _ in range(384):\n"
                "    sys.stdout.write(block)\n"
                "raw = block.encode() * 16\n"
                "for _ in range(40):\n"
                "    os.write(1, raw)\n"
                "'done'"
            )
            assert outcome.status == "ok", outcome.error
            result = outcome.output
            assert result.bytes_kept + result.bytes_dropped == total
            assert isinstance(DEFAULT_TRUNCATION, On)
            assert result.bytes_kept <= DEFAULT_TRUNCATION.limits.max_bytes
            assert result.text.endswith(b"y" * 1023 + b"\n")
            assert outcome.result == "'done'"

    run(scenario(), timeout=120)


def test_interrupting_a_cell_that_prints_in_a_tight_loop_never_cuts_a_frame() -> None:
    """A SIGINT landing inside a frame write is deferred until the write is whole: no protocol fault, ever."""

    async def scenario() -> None:
        async with KernelManager() as km:
            for size in (1, 100, 70_000, 300_000) * 3:
                cell = await km.execute(f"while True:\n    print('x' * {size})")
                await until(lambda: cell.output.bytes_written > 200_000, what="output")  # noqa: B023
                assert await km.interrupt()
                outcome = await cell.wait()
                assert outcome.status == "interrupted", outcome.error
            assert km.faults == []
            assert km.kernels_started == 1

    run(scenario())


def test_an_async_launch_starts_the_kernel_too() -> None:
    """The launch may be awaited (the installed venv's launch asks the kernel environment first)."""

    async def launch() -> KernelLaunch:
        return kernel_launch()

    async def scenario() -> None:
        async with KernelManager(launch=launch) as km:
            assert (await km.run("2 + 2")).result == "4"

    run(scenario())


def test_the_host_reaps_the_bash_groups_of_a_stub_that_died_abruptly() -> None:
    """The stub tells the host of each `bash()` group; a stub killed before it could clean up leaves none behind."""

    async def scenario() -> None:
        async with KernelManager() as km:
            started = await km.run("p = bash_background('sleep 300')\np.pid")
            assert started.result is not None
            child = int(started.result)
            done = await km.run("bash('true').returncode")
            assert done.result == "0"
            died = await km.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
            assert died.status == "died"
            await until(lambda: process_gone(child), what="the orphaned bash() group to be reaped")

    run(scenario())


def test_frames_from_many_writers_never_interleave() -> None:
    """Threads printing, raw fd writes (pumped), displays and host requests at once: every line is one whole frame."""

    async def scenario() -> None:
        kernel = await RawKernel.start()
        try:
            code = (
                "import os, sys, threading\n"
                "def spam(n):\n"
                "    for i in range(3000):\n"
                "        sys.stdout.write(f'{n}-{i}-' + 'z' * (i % 300) + '\\n')  # one write: one piece\n"
                "        if i % 500 == 0:\n"
                "            os.write(1, b'raw' * 1000 + b'\\n')\n"
                "            display(i)\n"
                "threads = [threading.Thread(target=spam, args=(n,)) for n in range(4)]\n"
                "for t in threads: t.start()\n"
                "for t in threads: t.join()\n"
            )
            kernel.send({"request": "execute", "id": "c1", "code": code})
            await kernel.until_frame(lambda f: f["event"] == "done")
            # Threads do not carry the cell's context: their writes are untagged, like raw fd writes.
            assert all(f["id"] is None for f in kernel.frames if f["event"] in ("stdout", "display"))
            text = "".join(f["text"] for f in kernel.frames if f["event"] == "stdout")
            expected = [f"{n}-{i}-" + "z" * (i % 300) + "\n" for n in range(4) for i in range(3000)]
            expected += ["raw" * 1000 + "\n"] * 24  # one write under PIPE_BUF: one piece
            assert sorted(text.splitlines(keepends=True)) == sorted(expected)
            assert sum(f["event"] == "display" for f in kernel.frames) == 24
        finally:
            await kernel.close()

    run(scenario())


def test_a_kernel_a_cell_waits_for_is_busy_while_it_starts() -> None:
    """Idle culling never stops a kernel a cell waits for: from the cell's send on, through the kernel's start."""
    launched = asyncio.Event()
    go = asyncio.Event()

    async def launch() -> KernelLaunch:
        launched.set()
        await go.wait()  # the start takes as long as the test wants
        return kernel_launch()

    async def scenario() -> None:
        async with KernelManager(launch=launch) as km:
            assert not km.busy
            cell = asyncio.create_task(km.run("6 * 7"))
            await launched.wait()
            assert km.busy, "a cell waits for this kernel"
            go.set()
            assert (await cell).result == "42"
            assert not km.busy

    run(scenario())
