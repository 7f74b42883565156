"""Idle culling and the crash-loop guard on a VirtualClock: upkeep asks a supervisor (its `Supervised` protocol, here a
scripted one) at exact pass times and stops a session exactly when it has been idle its timeout; a worker that
keeps dying right after its start stops being reopened; a bounded wait gives up exactly at its deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

from eukhe.clock import VirtualClock
from eukhe.daemon.supervisor import CRASH_LOOP_LIMIT, CRASH_LOOP_MS, CrashLoops
from eukhe.daemon.upkeep import Upkeeper, WorkerView, cull_interval_ms
from eukhe.daemon.waits import bounded
from eukhe.records.base import Record
from eukhe.records.daemon import CullAnswer, CullArgs, Pins
from eukhe.records.settings import Upkeep

A = TypeVar("A", bound=Record)


@dataclass
class ScriptedWorker:
    pid: int
    active_at_ms: int
    busy: bool = False
    kernel_live: bool = False


@dataclass
class ScriptedSupervisor:
    """A supervisor as upkeep sees it: workers whose idleness the test sets, and a log of what upkeep did."""

    clock: VirtualClock
    workers: dict[str, ScriptedWorker] = field(default_factory=dict)
    asked: list[tuple[int, str, str]] = field(default_factory=list)
    stopped: list[tuple[int, str]] = field(default_factory=list)

    def live_workers(self) -> list[WorkerView]:
        return [WorkerView(s, w.pid, w.busy, w.active_at_ms) for s, w in self.workers.items()]

    @asynccontextmanager
    async def holding(self, worker: WorkerView) -> AsyncIterator[bool]:
        current = self.workers.get(worker.session)  # busy or not: upkeep's own guard is what is tested
        yield current is not None and current.pid == worker.pid

    async def ask(self, worker: WorkerView, op: str, args: Record, answer: type[A]) -> A:
        self.asked.append((self.clock.now_ms(), worker.session, op))
        current = self.workers[worker.session]
        if isinstance(args, CullArgs):
            idle_ms = self.clock.now_ms() - current.active_at_ms
            idle = args.session_idle_ms > 0 and not current.kernel_live and idle_ms >= args.session_idle_ms
            reply: Record = CullAnswer(
                session=worker.session,
                kernel_culled=False,
                kernel_idle_s=None,
                idle=idle,
                idle_s=idle_ms / 1000,
                busy=["kernel"] if current.kernel_live else [],
            )
        else:
            reply = Pins(session=worker.session, artifacts=[])
        assert isinstance(reply, answer)
        return reply

    async def stop_idle(self, worker: WorkerView) -> None:
        self.stopped.append((self.clock.now_ms(), worker.session))
        del self.workers[worker.session]


async def turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def run_ms(clock: VirtualClock, ms: int) -> None:
    """`ms` milliseconds pass, with the loop's turns between ticks (so a woken pass runs at its own instant)."""
    for _ in range(ms):
        clock.tick()
        await turns()


def test_idle_culling_stops_a_session_at_the_first_pass_after_its_timeout_and_never_a_busy_one() -> None:
    upkeep = Upkeep(session_idle_timeout_s=1.0, kernel_idle_timeout_s=0)
    assert cull_interval_ms(upkeep) == 250

    async def scenario() -> None:
        clock = VirtualClock()
        supervisor = ScriptedSupervisor(clock)
        supervisor.workers["quiet"] = ScriptedWorker(pid=1, active_at_ms=0)
        supervisor.workers["late"] = ScriptedWorker(pid=2, active_at_ms=600)
        supervisor.workers["busy"] = ScriptedWorker(pid=3, active_at_ms=0, busy=True)
        supervisor.workers["kernel"] = ScriptedWorker(pid=4, active_at_ms=0, kernel_live=True)
        upkeeper = Upkeeper(supervisor, clock, load=lambda: upkeep)
        loop = asyncio.create_task(upkeeper._cull_loop())
        try:
            await turns()
            await run_ms(clock, 2_000)
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
        assert supervisor.stopped == [(1000, "quiet"), (1750, "late")]  # passes every 250 ms, from 0
        assert [event.session for event in upkeeper.culled] == ["quiet", "late"]
        assert not [a for a in supervisor.asked if a[1] == "busy"], "a worker with a request in flight is never asked"
        asked_late = sorted({at for at, session, op in supervisor.asked if session == "late" and op == "session.cull"})
        assert asked_late[0] == 1750, "a worker whose request ended too recently is not even asked"
        assert "kernel" in supervisor.workers, "a session with a live kernel is not idle"

    asyncio.run(scenario())


def test_a_worker_that_keeps_dying_right_after_its_start_stops_being_reopened() -> None:
    clock = VirtualClock()
    loops = CrashLoops(clock)
    verdicts = []
    for _ in range(CRASH_LOOP_LIMIT):
        started = clock.now_ms()
        clock.advance(CRASH_LOOP_MS - 1)
        verdicts.append(loops.reopen_after_death("s", started))
    assert verdicts == [True] * (CRASH_LOOP_LIMIT - 1) + [False]
    # A worker that lived CRASH_LOOP_MS starts the count again; another session's deaths do not count.
    other = CrashLoops(clock)
    started = clock.now_ms()
    assert other.reopen_after_death("t", started)
    clock.advance(CRASH_LOOP_MS)
    for _ in range(CRASH_LOOP_LIMIT + 1):
        assert other.reopen_after_death("t", started)  # each died CRASH_LOOP_MS after its start: not quick
    other.forget("t")
    assert other.reopen_after_death("u", clock.now_ms())


def test_a_bounded_wait_gives_up_exactly_at_its_deadline_on_its_clock() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(bounded(clock, never, 100))
        await turns()  # it starts waiting at 0
        await run_ms(clock, 99)
        assert not waiting.done()
        await run_ms(clock, 1)
        with pytest.raises(TimeoutError):
            await waiting
        assert never.cancelled(), "what timed out is cancelled"
        soon: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        answered = asyncio.ensure_future(bounded(clock, soon, 100))
        await turns()
        soon.set_result(7)
        assert await answered == 7

    asyncio.run(scenario())
