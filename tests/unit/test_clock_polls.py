"""`poll_until` on a virtual clock: the fact it asks about changes in real time, its deadline is the clock's."""

from __future__ import annotations

import asyncio

from eukhe.clock import VirtualClock, poll_until

HANG_S = 30.0  # only a hang reaches it


def test_a_poll_on_a_virtual_clock_sees_a_fact_that_changes_in_real_time() -> None:
    async def scenario() -> bool:
        clock = VirtualClock()
        loop = asyncio.get_running_loop()
        changed = loop.create_future()
        loop.call_soon(lambda: loop.call_soon(changed.set_result, None))
        # the clock never moves: the answer must come from the fact alone (a group emptied while a job drains)
        return await asyncio.wait_for(poll_until(clock, changed.done, deadline_ms=1_000), HANG_S)

    assert asyncio.run(scenario()) is True


def test_a_poll_on_a_virtual_clock_gives_up_only_when_the_clock_passes_its_deadline() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        asked = 0

        def never() -> bool:
            nonlocal asked
            asked += 1
            return False

        poll = asyncio.ensure_future(poll_until(clock, never, deadline_ms=100))
        while asked < 5:  # it keeps asking in real time while the clock stands still
            await asyncio.sleep(0.001)
        assert not poll.done()
        clock.advance(100)
        assert await asyncio.wait_for(poll, HANG_S) is False

    asyncio.run(scenario())
