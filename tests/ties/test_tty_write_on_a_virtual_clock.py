"""`jobs_write`'s wait (`eukhe.jobs.tty.write_to`) on a VirtualClock, with a real pseudo-terminal and the job's
output fed by hand: it answers exactly when `core.tty.write_verdict` says (quiet after the last output, the budget,
the end), with the output since the previous answer, and the input reaches the terminal."""

from __future__ import annotations

import asyncio
import os

from eukhe.clock import VirtualClock
from eukhe.core import job as core
from eukhe.core.bound import DEFAULT_TRUNCATION
from eukhe.core.tty import QUIET_MS
from eukhe.jobs.job import Job, JobSpec
from eukhe.jobs.table import JobTable
from eukhe.jobs.terminal import Terminal
from eukhe.jobs.tty import write_to
from eukhe.records.jobs import Settled
from eukhe.records.tty import Written


class Owner:
    def kill(self, job: Job) -> None:
        job.finish(core.Killed())


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def scenario(steps: list[tuple[int, bytes | None]], budget_ms: int) -> tuple[Written | Settled, int, bytes]:
    """Write "hi\\n" at 0, then at each (ms, data) step feed data (None: the job exits 0); the answer, when it
    came (virtual ms) and what the terminal's other side read."""

    async def run() -> tuple[Written | Settled, int, bytes]:
        clock = VirtualClock()
        table = JobTable(clock)
        job = table.start(JobSpec("bash", "repl", DEFAULT_TRUNCATION), Owner())
        master, slave = os.openpty()
        os.set_blocking(master, False)
        job.terminal = Terminal(master, 40, 10, DEFAULT_TRUNCATION, clock.now_ms)
        try:
            job.write(b"before the write\r\n")
            job.screen()  # an answer: the next one starts here
            call = asyncio.create_task(write_to(job, "hi\n", budget_ms))
            await turns()
            at = 0
            for when, data in steps:
                clock.advance(when - at)
                at = when
                await turns()
                if call.done():
                    break
                if data is None:
                    job.finish(core.exited(0))
                else:
                    job.write(data)
                await turns()
            while not call.done():
                clock.tick()
                await turns()
            read = os.read(slave, 100)
            return call.result(), clock.now_ms(), read
        finally:
            job.terminal.close()
            os.close(slave)

    return asyncio.run(run())


def test_tty_write_answers_quiet_after_the_last_output() -> None:
    answer, at, read = scenario([(10, b"hi\r\n"), (30, b"out\r\n>>> ")], budget_ms=5_000)
    assert isinstance(answer, Written)
    assert (answer.reason, at, answer.waited_ms) == ("quiet", 30 + QUIET_MS, 30 + QUIET_MS)
    assert answer.output.text == "hi\r\nout\r\n>>> "
    assert answer.screen == "hi\nout\n>>>"
    assert answer.input_bytes == 3 and read == b"hi\n"


def test_tty_write_with_no_output_answers_quiet_after_the_write() -> None:
    answer, at, _ = scenario([], budget_ms=5_000)
    assert isinstance(answer, Written)
    assert (answer.reason, at, answer.output.bytes_kept) == ("quiet", QUIET_MS, 0)


def test_tty_write_answers_at_the_budget_while_output_goes_on() -> None:
    steps = [(t, b"x\r\n") for t in range(10, 400, 20)]
    answer, at, _ = scenario(steps, budget_ms=150)
    assert isinstance(answer, Written)
    assert (answer.reason, at) == ("budget", 150)
    assert answer.output.lines_kept == 7


def test_tty_write_answers_settled_when_the_job_ends() -> None:
    answer, at, _ = scenario([(10, b"bye\r\n"), (20, None)], budget_ms=5_000)
    assert isinstance(answer, Settled)
    assert (answer.exit_code, at) == (0, 20)
    assert answer.screen == "before the write\nbye"
