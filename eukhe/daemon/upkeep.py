"""The daemon's upkeep: idle culling after Jupyter's, and artifact retention.

Culling. Every `cull_interval_s` the supervisor asks each worker with no client request in flight (`session.cull`):
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
from typing import TYPE_CHECKING, Any

from eukhe.daemon.protocol import Request
from eukhe.daemon.server import NO_EVENTS, RequestError
from eukhe.errors import EukheError
from eukhe.paths import sessions_root
from eukhe.records.daemon import CullArgs, CullReport, GcReport, SessionArgs
from eukhe.records.settings import Upkeep
from eukhe.session.settings import load_upkeep
from eukhe.store import artifacts, dirs

if TYPE_CHECKING:
    from eukhe.daemon.supervisor import Supervisor, Worker

log = logging.getLogger("eukhe.daemon")

GC_EVERY_S = 3600.0
LONGEST_CULL_INTERVAL_S = 10.0
SHORTEST_CULL_INTERVAL_S = 0.05
CULLED_KEPT = 50
ASK_TIMEOUT_S = 10.0
"""How long the supervisor waits for a worker's answer to its own questions (`session.cull`, `session.pins`)."""


def cull_interval_s(upkeep: Upkeep) -> float:
    """How often idle culling looks: a quarter of the shortest timeout in force, within [0.05 s, 10 s] (a changed
    setting takes effect within 10 s)."""
    timeouts = [t for t in (upkeep.session_idle_timeout_s, upkeep.kernel_idle_timeout_s) if t > 0]
    if not timeouts:
        return LONGEST_CULL_INTERVAL_S
    return max(SHORTEST_CULL_INTERVAL_S, min(LONGEST_CULL_INTERVAL_S, min(timeouts) / 4))


class Upkeeper:
    """The supervisor's idle culling and artifact collection."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
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
            upkeep = load_upkeep()
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
            await asyncio.sleep(cull_interval_s(upkeep))

    async def cull_once(self, upkeep: Upkeep) -> None:
        """One pass over the workers."""
        session_ms = round(upkeep.session_idle_timeout_s * 1000)
        kernel_ms = round(upkeep.kernel_idle_timeout_s * 1000)
        if not session_ms and not kernel_ms:
            return
        now = time.monotonic()
        for worker in list(self.supervisor.workers.values()):
            if worker.closing or worker.inflight or worker.process.returncode is not None:
                continue
            if not kernel_ms and (now - worker.active_at) * 1000 < session_ms:
                continue  # a request ended too recently: it cannot be idle yet (no need to ask)
            await self._cull(worker, session_ms, kernel_ms)

    async def _cull(self, worker: Worker, session_ms: int, kernel_ms: int) -> None:
        """Ask one worker; report a culled kernel; stop the worker if its session is idle."""
        supervisor = self.supervisor
        session_id = worker.session_id
        lock = supervisor.lock_of(session_id)
        if lock.locked():
            return  # a request is starting it, or a close is stopping it: not now
        async with lock:
            if supervisor.workers.get(session_id) is not worker or worker.inflight or worker.closing:
                return
            question = CullArgs(session=session_id, session_idle_ms=session_ms, kernel_idle_ms=kernel_ms)
            cull = Request(id="cull", op="session.cull", args=question)
            try:  # bounded: the session's requests wait behind this lock
                answer = await asyncio.wait_for(supervisor.forward(worker, cull, NO_EVENTS), ASK_TIMEOUT_S)
                if answer["idle"]:
                    await asyncio.wait_for(self._ask_pins(worker), ASK_TIMEOUT_S)
            except (RequestError, TimeoutError) as error:
                log.warning("session %s: idle culling could not ask its worker: %s", session_id, error)
                return
            if answer["kernel_culled"]:
                self._report("kernel_culled", worker, answer["kernel_idle_s"] or 0.0)
            if not answer["idle"]:
                return
            worker.closing = True
            await supervisor.stop_worker(worker)
            self._report("session_culled", worker, answer["idle_s"])

    def _report(self, event: Any, worker: Worker, idle_s: float) -> None:
        report = CullReport(
            event=event, session=worker.session_id, pid=worker.process.pid, idle_s=idle_s, at=time.time()
        )
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
            await asyncio.sleep(GC_EVERY_S)

    async def _ask_pins(self, worker: Worker) -> None:
        """Hear what the worker's last answer names (kept as the session's pins when it names anything)."""
        request = Request(id="pins", op="session.pins", args=SessionArgs(session=worker.session_id))
        answer = await self.supervisor.forward(worker, request, NO_EVENTS)
        if answer["artifacts"]:
            self.pins[worker.session_id] = list(answer["artifacts"])

    async def collect(self, *, dry_run: bool) -> GcReport:
        """Apply the retention policy now (or only plan it); the report (also kept as `last_gc` unless a dry run)."""
        upkeep = self.settings()
        for worker in list(self.supervisor.workers.values()):
            if worker.closing or worker.process.returncode is not None:
                continue
            with contextlib.suppress(RequestError, OSError, TimeoutError):
                await asyncio.wait_for(self._ask_pins(worker), ASK_TIMEOUT_S)
        pinned = [path for paths in self.pins.values() for path in paths]
        root = sessions_root()
        if not dry_run:
            await asyncio.to_thread(dirs.remove_leftovers, root)
        now_ms = round(time.time() * 1000)
        report = await asyncio.to_thread(artifacts.collect, root, pinned, upkeep, now_ms, dry_run=dry_run)
        if not dry_run:
            self.last_gc = report
        if report.removed:
            verb = "would free" if dry_run else "freed"
            log.info("artifact collection %s %d bytes in %d files", verb, report.bytes_freed, len(report.removed))
        return report
