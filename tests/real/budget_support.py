"""The session budget's cap (S2 "Jobs" 4), on a virtual clock: a blocking call that asks for more than the session's
`tool_blocking_budget_ms` (or for nothing) detaches exactly at the session's budget."""

from __future__ import annotations

import asyncio
import contextlib

from eukhe.clock import VirtualClock
from eukhe.records.jobs import Detached, Settled
from tests.real.kernel_support import until

SMALL_BUDGET_MS = 300
"""The session's budget in these tests."""
ASKED: list[int | None] = [None, 10 * SMALL_BUDGET_MS]
"""What the calls ask for: no budget, and one larger than the session's."""


async def detaches_exactly_at_the_budget(clock: VirtualClock, call: asyncio.Future[Settled | Detached]) -> Detached:
    """The call (already waiting, its deadline taken at the current virtual time) is not answered one tick before the
    session's budget and is answered `Detached` at it, naming that budget."""
    clock.advance(SMALL_BUDGET_MS - 1)
    await asyncio.sleep(0)
    assert not call.done(), f"answered before the session's budget: {call.result()}"
    clock.advance(1)
    with contextlib.suppress(AssertionError):  # a real event: the call's task runs once the timer fired
        await until(call.done, timeout=60.0)
    assert call.done(), "not answered at the session's budget: the call waits on past it"
    answer = call.result()
    assert isinstance(answer, Detached), answer
    assert answer.budget_ms == SMALL_BUDGET_MS
    return answer
