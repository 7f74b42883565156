"""A bounded wait on a clock for the daemon: `bounded` is `asyncio.wait_for` with its timeout in milliseconds on an
injected `Clock` (a virtual clock in tests), so every timeout of the daemon runs on the clock it was given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from eukhe.clock import Clock, wait_within

T = TypeVar("T")


async def bounded(clock: Clock, awaitable: Awaitable[T], ms: int) -> T:
    """`awaitable`'s result if it is done within `ms` on `clock`; else it is cancelled and TimeoutError raised.
    Cancelled meanwhile, it cancels `awaitable` too and waits for it to stop, as `asyncio.wait_for` does."""
    task = asyncio.ensure_future(awaitable)
    try:
        done = await wait_within(clock, task, ms)
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise TimeoutError(f"not done within {ms} ms")
    return task.result()
