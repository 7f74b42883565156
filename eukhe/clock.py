"""Clocks for every wait of the shell (spec S2 "Jobs" 4): the real monotonic one, a virtual one for tests, and the
three ways to wait on one: `sleep_ms`, `wait_within` (a future, bounded) and `poll_until` (a fact, bounded).

Times are integer milliseconds. A `Clock` tells the time and runs a callback at a deadline, in the event loop; the
virtual clock moves only when a test says so (one tick = 1 ms), so waits are exact and no test sleeps on wall time.
Every grace, drain and poll of a job's life runs on its table's clock, so a virtual clock covers the whole life.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


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


# ---------------------------------------------------------------------------------------------------------------------
# Waiting on a clock: the one sleep, the one bounded wait and the one poll loop of the shell


async def sleep_ms(clock: Clock, ms: int) -> None:
    """Sleep `ms` milliseconds on `clock` (a virtual clock wakes the sleeper only when a test moves it)."""
    await wait_until_deadline(clock, asyncio.get_running_loop().create_future(), clock.now_ms() + max(0, ms))


async def wait_until_deadline(clock: Clock, future: asyncio.Future[Any], deadline_ms: int) -> bool:
    """Wait for `future` until `deadline_ms` on `clock`, without cancelling it: True if it is done."""
    if future.done():
        return True
    if clock.now_ms() >= deadline_ms:
        return False
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)

    future.add_done_callback(wake)
    timer = clock.call_at(deadline_ms, wake)
    try:
        await woken
    finally:
        future.remove_done_callback(wake)
        timer.cancel()
    return future.done()


async def wait_within(clock: Clock, future: asyncio.Future[Any], ms: int) -> bool:
    """Wait for `future` at most `ms` milliseconds on `clock` (never cancels it): True if it is done."""
    return await wait_until_deadline(clock, future, clock.now_ms() + max(0, ms))


@dataclass(frozen=True, slots=True)
class Backoff:
    """How a poll loop paces itself: first pause, growth factor, longest pause (milliseconds)."""

    first_ms: int = 2
    factor: int = 2
    longest_ms: int = 50


DEFAULT_BACKOFF = Backoff()


async def poll_until(
    clock: Clock, done: Callable[[], bool], deadline_ms: int, backoff: Backoff = DEFAULT_BACKOFF
) -> bool:
    """Ask `done()` until it answers True or the deadline passes on `clock`; its last answer.

    For facts nobody announces (a process group emptied, a lock let go): checked at once, then after pauses that
    grow to `backoff.longest_ms`, and once more at the deadline.
    """
    loop = asyncio.get_running_loop()
    pause = backoff.first_ms
    while True:
        if done():
            return True
        now = clock.now_ms()
        if now >= deadline_ms:
            return False
        await wait_until_deadline(clock, _real_pause(loop, pause), min(now + pause, deadline_ms))
        pause = min(pause * backoff.factor, backoff.longest_ms)


def _real_pause(loop: asyncio.AbstractEventLoop, ms: int) -> asyncio.Future[None]:
    """A future done after `ms` of real time: the world's facts change in real time, also under a virtual clock,
    so a poll is paced by whichever comes first, this pause or the clock's step (the deadline stays the clock's)."""
    pause: asyncio.Future[None] = loop.create_future()

    def end() -> None:
        if not pause.done():
            pause.set_result(None)

    handle = loop.call_later(ms / 1000, end)
    pause.add_done_callback(lambda _: handle.cancel())
    return pause
