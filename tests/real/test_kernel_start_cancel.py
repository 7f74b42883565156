"""The kernel manager's start (S3 "Where the sandbox runs" 1): a start cancelled before the kernel's ready frame
leaves no kernel process behind."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest

from eukhe.daemon.orphans import children_of
from eukhe.kernel.manager import KernelManager
from tests.real.kernel_support import run, until


@pytest.mark.real
def test_a_cancelled_kernel_start_kills_and_reaps_the_kernel() -> None:
    async def scenario() -> None:
        before = {pid for pid, _ in children_of(os.getpid())}
        async with KernelManager() as km:
            start = asyncio.create_task(km.start())
            await until(lambda: km.kernels_started == 1, what="the kernel process is started")
            assert start.done() is False, "the kernel was ready before the cancel: nothing was tested"
            start.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await start
            assert km.pid is None
            assert {pid for pid, _ in children_of(os.getpid())} == before

    run(scenario())
