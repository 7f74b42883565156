"""The daemon's upkeep: idle culling after Jupyter's, and artifact retention.

Culling. Every `cull_interval_ms` the supervisor asks each worker with no client request in flight (`session.cull`):
the worker stops its kernel when nothing runs on it and it has been idle `kernel_idle_timeout_s` (0: never), then
says whether the session is idle: no job running, no live kernel, no watcher, no request, no child running, and
nothing done for `session_idle_timeout_s` (0: never). An idle session's worker is stopped, under the session's lock
(a request that comes meanwhile waits for it, then reopens the session in a fresh worker, as after a crash: its
journal and jobs are on disk). What was culled is reported (`culled` in `daemon status`).

Artifacts. At the daemon's start and every hour (and on `gc`), the retention policy (`artifact_max_total_bytes`,
`artifact_max_age_days`) is applied to every session's artifacts (`eukhe.store.artifacts`), keeping what is being
written and what the last answer of an open session names: each live worker is asked (`session.pins`), and a
culled session's pins are remembered until it is closed or deleted.

The settings are the user's (`<agent dir>/settings.json`), read again at every pass: a change takes effect without a
restart. A settings file that does not decode is logged, and the defaults apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from eukhe.clock import Clock, sleep_ms
from eukhe.daemon.replies import DaemonError
from eukhe.daemon.server import RequestError
from eukhe.daemon.waits import bounded
from eukhe.errors import EukheError
from eukhe.paths import sessions_root
from eukhe.records.base import Record
from eukhe.records.daemon import CullAnswer, CullArgs, CullReport, GcReport, Pins, SessionArgs
from eukhe.records.settings import Upkeep
from eukhe.session.settings import load_upkeep
from eukhe.store import artifacts, dirs

log = logging.getLogger("eukhe.daemon")

GC_EVERY_MS = 3_600_000
LONGEST_CULL_INTERVAL_MS = 10_000
SHORTEST_CULL_INTERVAL_MS = 50
CULLED_KEPT = 50
ASK_TIMEOUT_MS = 10_000
"""How long the supervisor waits for a worker's answer to its own questions (`session.cull`, `session.pins`)."""

A = TypeVar("A", bound=Record)


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A live worker (not asked to stop) as upkeep sees it: its session, its pid, whether a client request is in
    flight, and when its last one ended (ms, on the supervisor's clock)."""

    session: str
    pid: int
    busy: bool
    active_at_ms: int


class Supervised(Protocol):
    """What upkeep needs of the supervisor: its live workers, a session held still while culling looks at it, a
    question to a worker, and the stop of an idle one. A worker that is gone or changed since its view was taken
    is never asked or stopped."""

    def live_workers(self) -> list[WorkerView]: ...

    def holding(self, worker: WorkerView) -> AbstractAsyncContextManager[bool]:
        """Under the session's lock if it is free: True while `worker` is still its worker, alive and idle."""
        ...

    async def ask(self, worker: WorkerView, op: str, args: Record, answer: type[A]) -> A:
        """The supervisor's own question to `worker`; its answer as the record `answer`."""
        ...

    async def stop_idle(self, worker: WorkerView) -> None:
        """Stop `worker` (under `holding`): its session is idle; it reopens on its next request."""
        ...


def cull_interval_ms(upkeep: Upkeep) -> int:
    """How often idle culling looks: a quarter of the shortest timeout in force, within [50 ms, 10 s] (a changed
    setting takes effect within 10 s)."""
    timeouts = [ms for ms in (_ms(upkeep.session_idle_timeout_s), _ms(upkeep.kernel_idle_timeout_s)) if ms > 0]
    if not timeouts:
        return LONGEST_CULL_INTERVAL_MS
    return max(SHORTEST_CULL_INTERVAL_MS, min(LONGEST_CULL_INTERVAL_MS, min(timeouts) // 4))


def _ms(seconds: float) -> int:
    """A setting in seconds (the settings file's unit) as milliseconds."""
    return round(seconds * 1000)


class Upkeeper:
    """The supervisor's idle culling and artifact collection, every wait on `clock`."""

    def __init__(self, supervised: Supervised, clock: Clock, load: Callable[[], Upkeep] = load_upkeep) -> None:
        self.supervised = supervised
        self.clock = clock
        self._load = load
        self.culled: list[CullReport] = []
        self.last_gc: GcReport | None = None
        self.pins: dict[str, list[str]] = {}
        """The artifacts each session's last answer named, as last heard (kept until the session is closed)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._bad_settings: str | None = None

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._cull_loop()), asyncio.create_task(self._gc_loop())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def forget(self, session_id: str) -> None:
        """The session was closed or deleted: its last answer no longer pins anything."""
        self.pins.pop(session_id, None)

    def settings(self) -> Upkeep:
        """The user's upkeep settings now (the defaults, logged once, when the file does not decode)."""
        try:
            upkeep = self._load()
        except EukheError as error:
            if str(error) != self._bad_settings:
                self._bad_settings = str(error)
                log.error("%s; the upkeep defaults apply", error)
            return Upkeep()
        self._bad_settings = None
        return upkeep

    # --- culling ----------------------------------------------------------------------------------------------------

    async def _cull_loop(self) -> None:
        while True:
            upkeep = self.settings()
            try:
                await self.cull_once(upkeep)
            except Exception:
                log.exception("idle culling failed")
            await sleep_ms(self.clock, cull_interval_ms(upkeep))

    async def cull_once(self, upkeep: Upkeep) -> None:
        """One pass over the workers."""
        session_ms = _ms(upkeep.session_idle_timeout_s)
        kernel_ms = _ms(upkeep.kernel_idle_timeout_s)
        if not session_ms and not kernel_ms:
            return
        now = self.clock.now_ms()
        for worker in self.supervised.live_workers():
            if worker.busy:
                continue
            if not kernel_ms and now - worker.active_at_ms < session_ms:
                continue  # a request ended too recently: it cannot be idle yet (no need to ask)
            await self._cull(worker, session_ms, kernel_ms)

    async def _cull(self, worker: WorkerView, session_ms: int, kernel_ms: int) -> None:
        """Ask one worker; report a culled kernel; stop the worker if its session is idle."""
        supervised = self.supervised
        async with supervised.holding(worker) as held:
            if not held:
                return  # a request is starting it, or a close is stopping it: not now
            question = CullArgs(session=worker.session, session_idle_ms=session_ms, kernel_idle_ms=kernel_ms)
            try:  # bounded: the session's requests wait behind its lock
                answer = await bounded(
                    self.clock, supervised.ask(worker, "session.cull", question, CullAnswer), ASK_TIMEOUT_MS
                )
                if answer.idle:
                    await bounded(self.clock, self._ask_pins(worker), ASK_TIMEOUT_MS)
            except (RequestError, DaemonError, TimeoutError) as error:
                log.warning("session %s: idle culling could not ask its worker: %s", worker.session, error)
                return
            if answer.kernel_culled:
                self._report("kernel_culled", worker, answer.kernel_idle_s or 0.0)
            if not answer.idle:
                return
            await supervised.stop_idle(worker)
            self._report("session_culled", worker, answer.idle_s)

    def _report(self, event: Literal["session_culled", "kernel_culled"], worker: WorkerView, idle_s: float) -> None:
        report = CullReport(event=event, session=worker.session, pid=worker.pid, idle_s=idle_s, at=time.time())
        log.info("%s: session %s (worker %d) after %.1f s idle", event, report.session, report.pid, idle_s)
        self.culled.append(report)
        del self.culled[:-CULLED_KEPT]

    # --- artifacts --------------------------------------------------------------------------------------------------

    async def _gc_loop(self) -> None:
        while True:
            try:
                await self.collect(dry_run=False)
            except Exception:
                log.exception("artifact collection failed")
            await sleep_ms(self.clock, GC_EVERY_MS)

    async def _ask_pins(self, worker: WorkerView) -> None:
        """Hear what the worker's last answer names (kept as the session's pins when it names anything)."""
        answer = await self.supervised.ask(worker, "session.pins", SessionArgs(session=worker.session), Pins)
        if answer.artifacts:
            self.pins[worker.session] = list(answer.artifacts)

    async def collect(self, *, dry_run: bool) -> GcReport:
        """Apply the retention policy now (or only plan it); the report (also kept as `last_gc` unless a dry run)."""
        upkeep = self.settings()
        for worker in self.supervised.live_workers():
            with contextlib.suppress(RequestError, DaemonError, OSError, TimeoutError):
                await bounded(self.clock, self._ask_pins(worker), ASK_TIMEOUT_MS)
        pinned = [path for paths in self.pins.values() for path in paths]
        root = sessions_root()
        if not dry_run:
            await asyncio.to_thread(dirs.remove_leftovers, root)
        now_ms = round(time.time() * 1000)  # artifacts' ages are wall-clock times (their files' mtimes)
        report = await asyncio.to_thread(artifacts.collect, root, pinned, upkeep, now_ms, dry_run=dry_run)
        if not dry_run:
            self.last_gc = report
        if report.removed:
            verb = "would free" if dry_run else "freed"
            log.info("artifact collection %s %d bytes in %d files", verb, report.bytes_freed, len(report.removed))
        return report
