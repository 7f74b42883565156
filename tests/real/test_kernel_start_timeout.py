"""The kernel's start budget runs on the manager's clock (S3 "Where the sandbox runs" 1): on a VirtualClock, a stub
that never says ready fails its start exactly when the clock passes the budget, and no process of it is left."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from eukhe.clock import VirtualClock
from eukhe.core.kernel_life import Life, Phase, Reason
from eukhe.daemon.orphans import children_of
from eukhe.kernel.errors import KernelStartError
from eukhe.kernel.launch import KernelLaunch
from eukhe.kernel.manager import KILL_GRACE_MS, KernelManager
from tests.real.kernel_support import run, until

pytestmark = pytest.mark.real

BUDGET_MS = 5000
QUIET_TILL_EOF = "import sys; sys.stdin.buffer.read()"  # never says ready; exits when its stdin closes
DEAF = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"  # never exits by itself


def never_ready(code: str) -> KernelLaunch:
    return KernelLaunch(argv=(sys.executable, "-c", code), env=dict(os.environ))


async def start_times_out(code: str, grace_ms: int) -> None:
    clock = VirtualClock()
    before = {pid for pid, _ in children_of(os.getpid())}
    async with KernelManager(launch=lambda: never_ready(code), clock=clock, start_timeout_ms=BUDGET_MS) as km:
        start = asyncio.create_task(km.start())
        await until(lambda: km.kernels_started == 1 and clock.pending() > 0, what="the start's budget on the clock")
        assert {pid for pid, _ in children_of(os.getpid())} - before, "no stub runs: nothing was tested"
        clock.advance(BUDGET_MS - 1)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not start.done(), "the start failed before its budget passed"
        clock.advance(1)
        if grace_ms:  # the stub does not exit when its stdin closes: the kill's grace passes on the clock too
            await until(lambda: clock.pending() > 0, what="the kill's grace on the clock")
            clock.advance(grace_ms)
        with pytest.raises(KernelStartError, match=f"no ready frame within {BUDGET_MS} ms"):
            await start
        assert km.pid is None
        assert [life for _, life in km.lives] == [
            Life(Phase.STARTING),
            Life(Phase.ENDING, Reason.START_FAILED),
            Life(Phase.GONE, Reason.START_FAILED),
        ]
        assert {pid for pid, _ in children_of(os.getpid())} == before


def test_a_kernel_that_never_says_ready_fails_its_start_on_the_virtual_clock() -> None:
    run(start_times_out(QUIET_TILL_EOF, 0))


def test_a_deaf_kernel_that_never_says_ready_is_killed_after_the_grace_on_the_virtual_clock() -> None:
    run(start_times_out(DEAF, KILL_GRACE_MS))
