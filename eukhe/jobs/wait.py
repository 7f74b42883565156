"""The one blocking wait on a job (spec S2 "Jobs" 4): `wait_until(job, deadline)`.

Every blocking wait (a bash call, `jobs.wait`, `jobs.cancel`, the rewind wait, a cell's wait) goes through here. The
decision is the core's (`core.job.wait`), asked at the call and at every wake-up (the job's end or the deadline on
the job's clock): the end before the deadline settles with the job's own end; else the call detaches at the
deadline; a deadline already passed detaches at once, even when the end is ready.
"""

from __future__ import annotations

import asyncio

from eukhe.core import job as core
from eukhe.jobs.job import Job


async def wait_until(job: Job, deadline_ms: int) -> core.Settled | core.Detached:
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
