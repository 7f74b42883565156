"""Tie: a real `KernelManager` on a real stub, driven by generated scripts, lives the kernel life table's lives.

Each script (start, a cell, an interrupt, a snapshot stop, a kill, the kernel killed from outside, a start that
times out on the VirtualClock) drives a manager on a VirtualClock and the model (`eukhe.core.kernel_life`) fed the
events each action means; the manager's record of its kernels' lives must equal the model's, step for step.
"""

from __future__ import annotations

import asyncio
import enum
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eukhe.clock import VirtualClock
from eukhe.core.kernel_life import START, Event, Life, Phase, step, takes_calls, takes_cells
from eukhe.kernel.errors import KernelStartError
from eukhe.kernel.launch import KernelLaunch, kernel_launch, with_snapshot
from eukhe.kernel.manager import KernelManager
from tests.real.kernel_support import process_gone, run, until

pytestmark = pytest.mark.real

BUDGET_MS = 60_000  # the start's budget: it passes only when the test moves the clock
NEVER_READY = KernelLaunch(argv=(sys.executable, "-c", "import sys; sys.stdin.buffer.read()"), env=dict(os.environ))


class Act(enum.Enum):
    START = "start"
    CELL = "cell"
    INTERRUPT = "interrupt"
    SNAPSHOT_STOP = "snapshot_stop"
    KILL = "kill"
    DIE = "die"  # the kernel process is killed from outside (os.kill)
    START_TIMEOUT = "start_timeout"


class Model:
    """The manager as the table sees it: the current kernel's life, and every step of every kernel's life."""

    def __init__(self) -> None:
        self.life: Life | None = None
        self.kernels = 0
        self.lives: list[tuple[int, Life]] = []

    def feel(self, *events: Event) -> None:
        assert self.life is not None
        for event in events:
            after, _ = step(self.life, event)
            if after != self.life:
                self.lives.append((self.kernels, after))
            self.life = after

    def spawn(self) -> None:
        self.kernels += 1
        self.life = START
        self.lives.append((self.kernels, START))

    def act(self, act: Act) -> None:
        ready = self.life is not None and takes_cells(self.life)
        if act in (Act.START, Act.CELL) and not ready:
            self.spawn()
            self.feel(Event.READY)
        elif act is Act.START_TIMEOUT and not ready:
            self.spawn()
            self.feel(Event.START_TIMEOUT, Event.STDOUT_CLOSED, Event.EXITED)
            self.life = None
        elif act is Act.SNAPSHOT_STOP and self.life is not None:
            if takes_calls(self.life):
                self.feel(Event.SNAPSHOT_STOP, Event.SNAPSHOT_DONE)
            self.feel(Event.KILL, Event.STDOUT_CLOSED, Event.EXITED)
            self.life = None
        elif act is Act.KILL and self.life is not None:
            self.feel(Event.KILL, Event.STDOUT_CLOSED, Event.EXITED)
            self.life = None
        elif act is Act.DIE and ready:
            self.feel(Event.STDOUT_CLOSED, Event.EXITED)
            self.life = None


async def drive(km: KernelManager, clock: VirtualClock, hang: list[bool], act: Act) -> None:
    """Do `act` on the real manager, and wait (on real events) until its effects on the kernel's life are over."""
    if act is Act.START:
        await km.start()
    elif act is Act.CELL:
        outcome = await km.run("6 * 7")
        assert (outcome.status, outcome.result) == ("ok", "42")
    elif act is Act.INTERRUPT:
        assert await km.interrupt(timeout_ms=BUDGET_MS) is False  # no cell runs: nothing found
    elif act is Act.SNAPSHOT_STOP:
        await km.kill(snapshot=True)
    elif act is Act.KILL:
        await km.kill()
    elif act is Act.DIE:
        pid = km.pid
        if pid is None or not km.takes_calls:
            return
        os.kill(pid, signal.SIGKILL)
        await until(lambda: km.pid is None and process_gone(pid), what="the dead kernel's end")
        await until(lambda: km.lives[-1][1].phase is Phase.GONE, what="the dead kernel's life to end")
    elif act is Act.START_TIMEOUT:
        if km.takes_calls:
            await km.start()  # a ready kernel is started already: nothing happens
            return
        hang[0] = True
        started = km.kernels_started
        start = asyncio.create_task(km.start())
        try:
            await until(lambda: km.kernels_started > started and clock.pending() > 0, what="the start's budget")
            clock.advance(BUDGET_MS)
            with pytest.raises(KernelStartError, match="no ready frame"):
                await start
        finally:
            hang[0] = False


async def both(acts: list[Act], snapshot: Path) -> None:
    clock = VirtualClock()
    hang = [False]
    live = with_snapshot(kernel_launch(), str(snapshot))
    model = Model()
    async with KernelManager(
        launch=lambda: NEVER_READY if hang[0] else live, clock=clock, start_timeout_ms=BUDGET_MS
    ) as km:
        for act in acts:
            await drive(km, clock, hang, act)
            model.act(act)
            assert km.lives == model.lives, (acts, act)
        pid = km.pid
    model.act(Act.KILL)  # the manager's close
    assert km.lives == model.lives, acts
    assert pid is None or process_gone(pid)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(list(Act)), min_size=1, max_size=5))
@example([Act.CELL, Act.SNAPSHOT_STOP, Act.CELL, Act.DIE, Act.START_TIMEOUT, Act.INTERRUPT, Act.CELL, Act.KILL])
def test_the_real_kernel_life_equals_the_model(acts: list[Act]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        run(both(acts, Path(directory) / "snapshot.pickle"), timeout=120)
