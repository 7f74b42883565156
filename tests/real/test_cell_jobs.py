"""Cells that become jobs (S2 "Jobs" 1, 3, 4) on a real kernel: settle, detach with every byte, wait, cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eukhe.clock import VirtualClock
from eukhe.core import job as core
from eukhe.core.bound import Keep, Off, On, OutputLimits
from eukhe.jobs.table import JobTable, JobTableClosedError
from eukhe.jobs.wait import wait_until
from eukhe.kernel.cells import CellJobs
from eukhe.kernel.manager import Admission, KernelManager
from eukhe.records.jobs import Detached, Settled
from tests.real.kernel_support import run, until

pytestmark = pytest.mark.real

FAR_MS = 60_000


def gate_handlers() -> tuple[asyncio.Event, dict[str, Any]]:
    gate = asyncio.Event()

    async def wait_gate(admission: Admission) -> str:
        await gate.wait()
        return "open"

    return gate, {"gate": wait_gate}


def test_a_cell_within_its_budget_settles_with_result_and_error() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            cells = CellJobs(km, JobTable())
            settled = await cells.ipython("print('hi')\n6 * 7", 10_000)
            assert isinstance(settled, Settled)
            assert (settled.outcome, settled.output.text, settled.result, settled.error, settled.job) == (
                "ok",
                "hi\n",
                "42",
                None,
                None,
            )
            assert (settled.exit_code, settled.killed, settled.kind) == (0, False, "cell")
            failed = await cells.ipython("raise ValueError('no')", 10_000)
            assert isinstance(failed, Settled)
            error = failed.error
            assert error is not None
            assert (error.ename, error.evalue, failed.exit_code) == ("ValueError", "no", 1)
            assert any("raise ValueError" in line for line in error.traceback)
            assert cells.jobs() == ()

    run(scenario())


def test_a_cell_past_its_budget_becomes_a_job_whose_output_starts_with_every_byte_before() -> None:
    async def scenario() -> None:
        gate, handlers = gate_handlers()
        async with KernelManager(truncation=Off(), handlers=handlers) as km:
            table = JobTable()
            cells = CellJobs(km, table)
            await km.start()  # the budget counts the kernel's start: start it first
            detached = await cells.ipython(
                "from eukhe_kernel.api import host_request\n"
                "print('before')\n"
                "await host_request('gate')\n"
                "print('after')\n"
                "'finished'",
                50,
            )
            assert isinstance(detached, Detached)
            answer = detached.to_json()
            assert (answer["status"], answer["job"], answer["budget_ms"]) == ("detached", detached.job, 50)
            assert detached.output.text == "before\n"
            job = table.get(detached.job)
            assert job is not None
            assert job.running
            assert job.spec.kind == "cell"
            assert job.spec.written == b"before\n"
            assert [j.id for j in cells.jobs()] == [job.id]
            gate.set()
            verdict = await wait_until(job, table.clock.now_ms() + FAR_MS)
            assert verdict == core.EndedInTime(core.Exited(0))
            assert job.result().text == b"before\nafter\n"
            outcome = cells.outcome(job.id)
            assert outcome is not None
            assert outcome.result == "'finished'"

    run(scenario())


def test_a_detached_cell_job_counts_every_byte_of_the_run() -> None:
    """20 MiB before the detach (past the in-memory record: spilled), more after: kept + dropped is exact."""
    before = 20 * 1024 * 1024
    after = 3 * 1024 * 1024

    async def scenario() -> None:
        gate, handlers = gate_handlers()
        reached = asyncio.Event()  # the cell asked for the gate: every byte before it has been read (frames in order)
        wait_gate = handlers["gate"]

        async def reach_gate(admission: Admission) -> str:
            reached.set()
            return str(await wait_gate(admission))

        handlers["gate"] = reach_gate
        truncation = On(OutputLimits(4096, 100, Keep.TAIL))
        async with KernelManager(truncation=truncation, handlers=handlers) as km:
            clock = VirtualClock()  # the budget passes when the test says, never while 20 MiB are on their way
            table = JobTable(clock)
            cells = CellJobs(km, table)
            call = asyncio.ensure_future(
                cells.ipython(
                    "import sys\nfrom eukhe_kernel.api import host_request\n"
                    f"sys.stdout.write('a' * {before - 1} + '\\n')\n"
                    "await host_request('gate')\n"
                    f"sys.stdout.write('b' * {after - 1} + '\\n')",
                    1500,
                )
            )
            await reached.wait()
            clock.advance(1500)
            detached = await call
            assert isinstance(detached, Detached)
            job = table.get(detached.job)
            assert job is not None
            assert job.kept + job.dropped == before
            gate.set()
            assert await wait_until(job, table.clock.now_ms() + FAR_MS) == core.EndedInTime(core.Exited(0))
            assert job.kept + job.dropped == before + after
            final = job.result()
            assert final.bytes_kept + final.bytes_dropped == before + after
            assert final.text.endswith(b"b\n")

    run(scenario())


def test_cancelling_a_cell_job_interrupts_the_cell() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            table = JobTable()
            cells = CellJobs(km, table)
            await km.start()
            detached = await cells.ipython("print('spin')\nwhile True:\n    pass", 50)
            assert isinstance(detached, Detached)
            job = table.get(detached.job)
            assert job is not None
            pid = km.pid
            await until(lambda: b"spin" in job.snapshot().text, what="the cell to run")
            job.kill()
            assert await wait_until(job, table.clock.now_ms() + FAR_MS) == core.EndedInTime(core.Killed())
            outcome = cells.outcome(job.id)
            assert outcome is not None
            assert outcome.status == "interrupted"
            again = await cells.ipython("1", 10_000)
            assert isinstance(again, Settled)
            assert km.pid == pid  # the interrupt was enough: same kernel
            await cells.close()

    run(scenario())


def test_a_cell_that_ignores_the_interrupt_has_its_kernel_killed_after_the_grace() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            table = JobTable()
            cells = CellJobs(km, table, grace_s=0.3)
            await km.start()
            detached = await cells.ipython(
                "import time\nprint('stubborn')\nwhile True:\n    try:\n        time.sleep(1)\n"
                "    except KeyboardInterrupt:\n        pass",
                50,
            )
            assert isinstance(detached, Detached)
            job = table.get(detached.job)
            assert job is not None
            pid = km.pid
            await until(lambda: b"stubborn" in job.snapshot().text, what="the cell to run")
            job.kill()
            assert await wait_until(job, table.clock.now_ms() + FAR_MS) == core.EndedInTime(core.Killed())
            outcome = cells.outcome(job.id)
            assert outcome is not None
            assert outcome.status == "killed"
            await cells.close()
            fresh = await cells.ipython("2", 10_000)
            assert isinstance(fresh, Settled)
            assert fresh.result == "2"
            await until(lambda: km.pid is not None and km.pid != pid, what="a fresh kernel")

    run(scenario())


def test_a_cell_past_its_budget_on_a_closed_table_is_interrupted_not_left_unowned() -> None:
    async def scenario() -> None:
        async with KernelManager() as km:
            table = JobTable()
            cells = CellJobs(km, table)
            await km.start()
            await table.quit(table.clock.now_ms())  # the host is quitting: no job may start
            with pytest.raises(JobTableClosedError):
                await cells.ipython("print('spin')\nwhile True:\n    pass", 50)
            run = await km.execute("'next'")  # runs only once the spinning cell ended (its interrupt)
            outcome = await asyncio.wait_for(run.wait(), 20)
            assert outcome.result == "'next'"
            await cells.close()

    run(scenario())
