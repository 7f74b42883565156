"""The one blocking wait on a job (spec S2 "Jobs" 4): `wait_until(job, deadline)`, and the wait of a blocking call
built on it, `settle_or_detach` (a bash call's and a cell's).

Every blocking wait (a bash call, `jobs.wait`, `jobs.cancel`, the rewind wait, a cell's wait) goes through here. The
decision is the core's (`core.job.wait`), asked at the call and at every wake-up (the job's end or the deadline on
the job's clock): the end before the deadline settles with the job's own end; else the call detaches at the
deadline; a deadline already passed detaches at once, even when the end is ready.

Cancelling `wait_until` never touches the job. Cancelling a blocking call (`settle_or_detach`; Ctrl-C at the CLI)
aborts it: the job is killed through its owner, its end is awaited within the call's span, then the cancellation
goes on (`CancelledError`). The daemon answers such a call with `CallCancelledError`, which says how the job ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from eukhe.core import job as core
from eukhe.errors import EukheError
from eukhe.jobs.job import Job
from eukhe.records.jobs import Detached, Settled


class CallCancelledError(EukheError):
    """A blocking call was cancelled: its job was killed through its owner. `answer` says whether it ended."""

    code = "cancelled"

    def __init__(self, answer: Settled | Detached) -> None:
        if isinstance(answer, Settled):
            text = f"cancelled: job {answer.job} ended ({'killed' if answer.killed else f'exit {answer.exit_code}'})"
        else:
            text = f"cancelled: job {answer.job} was killed and is still stopping"
        super().__init__(text)
        self.answer = answer


async def wait_until(job: Job, deadline_ms: int) -> core.EndedInTime | core.DeadlinePassed:
    """Wait for the job's end, at most until `deadline_ms` on `job.clock`. Cancelling it never touches the job."""
    clock = job.clock
    loop = asyncio.get_running_loop()
    while True:
        verdict = core.wait(job.state, clock.now_ms(), deadline_ms)
        if not isinstance(verdict, core.Waiting):
            return verdict
        woken: asyncio.Future[None] = loop.create_future()

        def wake(woken: asyncio.Future[None] = woken) -> None:
            if not woken.done():
                woken.set_result(None)

        stop_end = job.on_end_once(wake)
        timer = clock.call_at(deadline_ms, wake)
        try:
            await woken
        finally:
            stop_end()
            timer.cancel()


async def settle_or_detach(
    job: Job, deadline_ms: int, span_ms: int, *, left: Callable[[], Job] | None = None
) -> core.EndedInTime | core.DeadlinePassed:
    """A blocking call's wait: the job's end before `deadline_ms`, else the deadline passed (the job goes on).

    Cancelled, it kills the job the call leaves behind (`left()`'s when that is not the one waited on: a cell that
    becomes a job) through its owner, waits for its end at most `span_ms` (the call's span) more, then re-raises."""
    try:
        return await wait_until(job, deadline_ms)
    except asyncio.CancelledError:
        stopping = job if left is None else left()
        stopping.kill()
        await wait_until(stopping, stopping.clock.now_ms() + span_ms)
        raise
