"""Clocks for every blocking wait (spec S2 "Jobs" 4): the real monotonic one and a virtual one for tests.

Times are integer milliseconds. A `Clock` tells the time and runs a callback at a deadline, in the event loop; the
virtual clock moves only when a test says so (one tick = 1 ms), so waits are exact and no test sleeps on wall time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    """A scheduled callback that can be called off."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic milliseconds, and callbacks at a deadline."""

    def now_ms(self) -> int: ...

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> Cancellable: ...


class MonotonicClock:
    """The real clock: `time.monotonic_ns()` in ms; callbacks through the running loop's timer."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> Cancellable:
        loop = asyncio.get_running_loop()
        delay = max(0.0, (deadline_ms - self.now_ms()) / 1000)
        return loop.call_later(delay, callback)


class _Timer:
    """A virtual clock's scheduled callback."""

    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    """A clock that moves only by `tick` (1 ms) or `advance`; due callbacks run in deadline order, synchronously.

    A waiter woken by a callback runs at the event loop's next turn (`await asyncio.sleep(0)` in the test).
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms
        self._timers: list[tuple[int, int, _Timer]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_at(self, deadline_ms: int, callback: Callable[[], None]) -> Cancellable:
        timer = _Timer(callback)
        heapq.heappush(self._timers, (deadline_ms, next(self._order), timer))
        self._fire()  # a deadline already passed fires at once, as a real timer with no delay would soon
        return timer

    def tick(self) -> None:
        """One millisecond passes."""
        self._now += 1
        self._fire()

    def advance(self, ms: int) -> None:
        """`ms` milliseconds pass, one tick at a time."""
        for _ in range(ms):
            self.tick()

    def pending(self) -> int:
        """How many callbacks are scheduled and not cancelled (for tests)."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)

    def _fire(self) -> None:
        while self._timers and self._timers[0][0] <= self._now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.cancelled = True
                timer.callback()
