"""The job table (spec S2 "Jobs" 2, 5, 6): starts jobs, tells listeners of starts and ends, and stops the orphans of
a rewind.

The rewind order is the order of the entry commits (`observe`) and job starts the table sees as they occur; the core
(`core.job.rewind`) decides from it which running jobs a rewind stops: those started after the target's commit. An
entry the table never saw (committed before the open), or the target "none", comes before every job.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from eukhe.clock import Clock, MonotonicClock
from eukhe.core import job as core
from eukhe.errors import EukheError
from eukhe.jobs.job import Job, JobOwner, JobSpec
from eukhe.jobs.wait import wait_until


class JobTableClosedError(EukheError):
    """The host quit: the table starts no more jobs."""

    code = "job_table_closed"


class JobListener(Protocol):
    """Hears every start and end, synchronously (the session's job writer)."""

    def job_started(self, job: Job) -> None: ...

    def job_ended(self, job: Job, end: core.End) -> None: ...


@dataclass(frozen=True, slots=True)
class Rewound:
    """The jobs a rewind (or quit) killed: those ended by its deadline, and those still ending."""

    stopped: tuple[Job, ...]
    stopping: tuple[Job, ...]


class JobTable:
    """Every job of one host process (a session), in start order."""

    def __init__(self, clock: Clock | None = None, *, new_id: Callable[[], str] | None = None) -> None:
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self._new_id = new_id if new_id is not None else _random_id
        self._jobs: dict[str, Job] = {}
        self._order: list[core.Mark] = []
        self._listeners: list[JobListener] = []
        self._closed = False
        self._reserved: frozenset[str] = frozenset()

    def reserve(self, job_ids: Iterable[str]) -> None:
        """Ids no new job takes (the jobs of a session's earlier lives)."""
        self._reserved = self._reserved | frozenset(job_ids)

    def subscribe(self, listener: JobListener) -> Callable[[], None]:
        """Hear every later start and end; answers the function that stops it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def new_id(self) -> str:
        """A job id no job of this table has (a run that may become a job later reserves its id with this)."""
        job_id = self._new_id()
        while job_id in self._jobs or job_id in self._reserved:
            job_id = self._new_id()
        return job_id

    def start(self, spec: JobSpec, owner: JobOwner, *, job_id: str | None = None) -> Job:
        """A new running job (under `job_id`, reserved with `new_id`, or a fresh one); listeners hear of it before
        this returns."""
        if self._closed:
            raise JobTableClosedError("the host is quitting: no new job starts")
        if job_id is None or job_id in self._jobs or job_id in self._reserved:
            job_id = self.new_id()
        job = Job(job_id, spec, owner, self.clock, on_end=self._ended)
        self._jobs[job_id] = job
        self._order.append(core.Started(job_id))
        for listener in tuple(self._listeners):
            listener.job_started(job)
        return job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self) -> tuple[Job, ...]:
        """Every job, in start order."""
        return tuple(self._jobs.values())

    def running(self) -> tuple[Job, ...]:
        """The running jobs, in start order."""
        return tuple(job for job in self._jobs.values() if job.running)

    def observe(self, entry_id: str) -> None:
        """An entry was committed, now: the rewind order."""
        self._order.append(core.Committed(entry_id))

    def orphans_of(self, target: str | None) -> tuple[Job, ...]:
        """The running jobs a rewind to `target` would stop (started after the target's commit); kills nothing."""
        verdict = core.rewind(self._order, {job.id for job in self.running()}, target)
        return tuple(self._jobs[job_id] for job_id in verdict.stop)

    def rewind_to(self, target: str | None) -> tuple[Job, ...]:
        """Kill, through their owners, the running jobs started after the target's commit; answer them."""
        stopped = self.orphans_of(target)
        for job in stopped:
            job.kill()
        return stopped

    async def rewind(self, target: str | None, deadline_ms: int) -> Rewound:
        """`rewind_to`, then wait for the killed jobs' ends until the deadline."""
        return await _wait_all(self.rewind_to(target), deadline_ms)

    async def quit(self, deadline_ms: int) -> Rewound:
        """The host quits: kill every running job and wait for their ends until the deadline; start no more."""
        self._closed = True
        jobs = self.running()
        for job in jobs:
            job.kill()
        return await _wait_all(jobs, deadline_ms)

    def _ended(self, job: Job, end: core.End) -> None:
        for listener in tuple(self._listeners):
            listener.job_ended(job, end)


async def _wait_all(jobs: tuple[Job, ...], deadline_ms: int) -> Rewound:
    """Wait for each job's end until one shared deadline; split them into ended and still ending."""
    for job in jobs:
        await wait_until(job, deadline_ms)
    return Rewound(
        stopped=tuple(job for job in jobs if not job.running), stopping=tuple(job for job in jobs if job.running)
    )


def _random_id() -> str:
    return f"job-{secrets.token_hex(4)}"
