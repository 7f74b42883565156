"""Cells that become jobs (S2 "Jobs" 1, 3, 4; the `ipython` tool): `CellJobs`.

A cell call waits through `wait_until` (on a private job fed the cell's output) at most until its budget. A cell
that ends in time settles the call with its outcome. Past the budget the call detaches: the cell becomes a job in
the session's `JobTable` whose output starts with every byte the run wrote before (`JobSpec.written`), so the job
counts every byte of the run; it then appears in `jobs.list`, can be waited on and cancelled. Cancel = interrupt
the cell, then kill the kernel if the cell has not ended after the grace. The job ends when the cell does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import tempfile
from collections.abc import Callable, Iterator
from typing import IO

from eukhe.clock import wait_until_deadline
from eukhe.core import job as core
from eukhe.jobs.job import CellEnding, Job, JobSpec, end_fields
from eukhe.jobs.table import JobTable
from eukhe.jobs.wait import settle_or_detach
from eukhe.kernel.manager import CellOutcome, CellRun, KernelManager
from eukhe.records.jobs import Detached, Settled

CANCEL_GRACE_S = 2.0
"""After interrupting a cancelled cell job, how long the cell has to end before its kernel is killed."""

RECORD_IN_MEMORY = 8 * 1024 * 1024
"""A cell's output before it detaches is held in memory up to this, then in a private unnamed temporary file."""

INTERRUPTED_EXIT = 128 + 2  # a cell stopped by SIGINT, in a shell's words


def end_of(outcome: CellOutcome) -> core.End:
    """A cell's end as a job's end: ok 0, error 1, interrupted 130; killed: Killed."""
    if outcome.status == "ok":
        return core.Exited(0)
    if outcome.status == "interrupted":
        return core.Exited(INTERRUPTED_EXIT)
    if outcome.status == "killed":
        return core.Killed()
    return core.Exited(1)


class _Recording:
    """Every byte a cell wrote before it detached: in memory up to a bound, then in an unnamed private file."""

    def __init__(self) -> None:
        self._memory = bytearray()
        self._file: IO[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self._file is None and len(self._memory) + len(data) <= RECORD_IN_MEMORY:
            self._memory += data
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile()  # noqa: SIM115 - lives until close(); mode 0600, unlinked at once
            self._file.write(self._memory)
            self._memory = bytearray()
        self._file.write(data)

    @property
    def in_memory(self) -> bool:
        return self._file is None

    def memory(self) -> bytes:
        return bytes(self._memory)

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The recorded bytes in order (from the file when spilled)."""
        if self._file is None:
            yield bytes(self._memory)
            return
        self._file.seek(0)
        while chunk := self._file.read(size):
            yield chunk

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._memory = bytearray()


class _CellOwner:
    """The owner of a cell's job: a kill interrupts the cell, then kills the kernel past the grace."""

    def __init__(self, cells: CellJobs, run: CellRun) -> None:
        self._cells = cells
        self._run = run

    def kill(self, job: Job) -> None:
        self._cells.cancel_later(self._run)


class CellJobs:
    """Runs `ipython` cells on one kernel manager and turns the ones past their budget into jobs of `table`."""

    def __init__(self, manager: KernelManager, table: JobTable, *, grace_s: float = CANCEL_GRACE_S) -> None:
        self.manager = manager
        self.table = table
        self.grace_s = grace_s
        self._calls = itertools.count(1)
        self._outcomes: dict[str, CellOutcome] = {}
        self._cancels: set[asyncio.Task[None]] = set()

    def outcome(self, job_id: str) -> CellOutcome | None:
        """The outcome of a cell job once it ended (its result and error, beyond the job's end)."""
        return self._outcomes.get(job_id)

    def jobs(self) -> tuple[Job, ...]:
        """The cell jobs in the table, in start order."""
        return tuple(job for job in self.table.jobs() if job.spec.kind == "cell")

    async def ipython(
        self,
        code: str,
        budget_ms: int,
        *,
        timeout_ms: int | None = None,
        on_start: Callable[[str], None] | None = None,
        on_live: Callable[[Job], None] | None = None,
        job_id: str | None = None,
    ) -> Settled | Detached:
        """Run one cell; settle within `timeout_ms` (None: the whole budget) capped by `budget_ms`, else detach it
        as a job (S2 jobs 4). The one clamp is `core.deadline_for`'s.

        The cell's job id (`job_id`, else a new one) is taken at once (`on_start` hears it): a cell that detaches
        becomes that job. `on_live` hears what holds the cell's output so far: a job outside the table until the
        cell detaches, then the table's job.
        Cancelling the call makes the cell that job too, cancelled through its owner (interrupted, then its kernel
        killed past the grace); its end is awaited at most `budget_ms`, then the cancellation goes on."""
        clock = self.table.clock
        started = clock.now_ms()
        deadline = core.deadline_for(started, timeout_ms, budget_ms)
        span = deadline - started
        title = _title(code)
        job_id = job_id if job_id is not None and self.table.get(job_id) is None else self.table.new_id()
        spec = JobSpec("cell", title, self.manager.truncation, None)
        record = _Recording()
        detached: list[Job] = []
        run_box: list[CellRun] = []
        waiter = Job(f"call-{next(self._calls)}", spec, _Deferred(self, run_box), clock)

        def on_output(data: bytes) -> None:
            if detached:
                detached[0].write(data)
            else:
                record.write(data)
                waiter.write(data)

        def on_end(outcome: CellOutcome) -> None:
            waiter.finish(end_of(outcome))
            if detached:
                self._end_job(detached[0], outcome)

        run = await self.manager.execute(code, on_output=on_output, on_end=on_end)
        run_box.append(run)
        if on_start is not None:
            on_start(job_id)
        if on_live is not None:
            on_live(waiter)

        def detach() -> Job:
            job = self._detach(run, record, detached, job_id, title)
            if on_live is not None:
                on_live(job)
            return job

        verdict = await settle_or_detach(waiter, deadline, span, left=detach)
        if isinstance(verdict, core.EndedInTime):
            outcome = run.outcome()
            assert outcome is not None
            record.close()
            exit_code, killed = end_fields(end_of(outcome))
            return Settled(
                job=None,
                kind="cell",
                command=title,
                exit_code=exit_code,
                killed=killed,
                output=outcome.output.to_record(),
                outcome=outcome.status,
                result=outcome.result,
                error=outcome.error,
                displays=list(outcome.displays),
                displays_notice=outcome.displays_notice,
                displays_dropped=outcome.displays_dropped,
                notices=list(run.notices),
            )
        job = detached[0] if detached else detach()
        output, notices = waiter.snapshot().to_record(), list(run.notices)
        return Detached(job=job.id, kind="cell", command=title, budget_ms=span, output=output, notices=notices)

    def _detach(self, run: CellRun, record: _Recording, detached: list[Job], job_id: str, title: str) -> Job:
        """The cell becomes job `job_id` of the table, counting every byte it wrote before."""
        written = record.memory() if record.in_memory else b""
        try:
            job = self.table.start(
                JobSpec("cell", title, self.manager.truncation, self.manager.artifact_dir, written=written),
                _CellOwner(self, run),
                job_id=job_id,
            )
        except BaseException:  # no job (the host is quitting): the cell must not go on unowned
            self.cancel_later(run)
            record.close()
            raise
        if not record.in_memory:
            for chunk in record.chunks():
                job.write(chunk)
        record.close()
        detached.append(job)
        finished = run.outcome()
        if finished is not None:  # it ended just as the deadline passed
            self._end_job(job, finished)
        return job

    def _end_job(self, job: Job, outcome: CellOutcome) -> None:
        self._outcomes[job.id] = outcome
        job.cell = CellEnding(
            outcome.status,
            outcome.result,
            outcome.error,
            outcome.displays,
            outcome.displays_notice,
            outcome.displays_dropped,
        )
        job.finish(core.Killed() if job.kill_requested else end_of(outcome))

    def cancel_later(self, run: CellRun) -> None:
        """Interrupt the cell; if it has not ended after the grace, kill its kernel (in the background). The grace
        runs on the job's clock from now, the cancel, not from the kernel's answer to the interrupt."""
        grace_ms = round(self.grace_s * 1000)
        deadline_ms = self.table.clock.now_ms() + grace_ms
        task = asyncio.get_running_loop().create_task(self._cancel(run, grace_ms, deadline_ms))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel(self, run: CellRun, grace_ms: int, deadline_ms: int) -> None:
        if run.done:
            return
        await self.manager.interrupt(run.id, timeout_ms=grace_ms)
        ended = asyncio.ensure_future(run.wait())  # waiting on it never cancels the cell
        if not await wait_until_deadline(self.table.clock, ended, deadline_ms):
            ended.cancel()
            if not run.done:
                await self.manager.kill()

    async def close(self) -> None:
        """Wait for the cancels under way."""
        while self._cancels:
            await asyncio.gather(*list(self._cancels), return_exceptions=True)


class _Deferred:
    """The private waiting job's owner: a kill before detaching cancels the cell like a job's would."""

    def __init__(self, cells: CellJobs, run_box: list[CellRun]) -> None:
        self._cells = cells
        self._run_box = run_box

    def kill(self, job: Job) -> None:
        with contextlib.suppress(IndexError):
            self._cells.cancel_later(self._run_box[0])


def _title(code: str) -> str:
    """A one-line description of a cell for jobs.list and the prompt."""
    lines = [line.strip() for line in code.strip().splitlines() if line.strip()]
    first = lines[0] if lines else "<empty cell>"
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return (first[:80] + ("…" if len(first) > 80 else "")) + more
