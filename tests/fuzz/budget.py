"""Fuzzing with a fixed time budget per target.

Each target runs cases for FUZZ_SECONDS (3 by default; `FUZZ_SECONDS=600 uv run pytest tests/fuzz` is the long run,
docs/testing.md). Case i draws from `random.Random(f"{seed}-{i}")`, so a failure names the seed and the case, and
`FUZZ_SEED=<seed>` replays the run's cases in the same order.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Awaitable, Callable

DEFAULT_SECONDS = 3.0


def budget_seconds() -> float:
    return float(os.environ.get("FUZZ_SECONDS", DEFAULT_SECONDS))


def fuzz_for(case: Callable[[random.Random], None], *, seconds: float | None = None, at_least: int = 1) -> int:
    """Run `case` on fresh seeded randomness until the budget passes (at least `at_least` cases); the count."""
    seed = os.environ.get("FUZZ_SEED") or f"{int.from_bytes(os.urandom(4), 'big')}"
    deadline = time.monotonic() + (budget_seconds() if seconds is None else seconds)
    done = 0
    while done < at_least or time.monotonic() < deadline:
        try:
            case(random.Random(f"{seed}-{done}"))
        except BaseException as error:
            error.add_note(f"fuzz case {done} of seed {seed}: replay with FUZZ_SEED={seed}")
            raise
        done += 1
    print(f"fuzz: {done} cases, seed {seed}")
    return done


async def afuzz_for(
    case: Callable[[random.Random], Awaitable[None]], *, seconds: float | None = None, at_least: int = 1
) -> int:
    """`fuzz_for` for a coroutine case (one event loop for the whole run)."""
    seed = os.environ.get("FUZZ_SEED") or f"{int.from_bytes(os.urandom(4), 'big')}"
    deadline = time.monotonic() + (budget_seconds() if seconds is None else seconds)
    done = 0
    while done < at_least or time.monotonic() < deadline:
        try:
            await case(random.Random(f"{seed}-{done}"))
        except BaseException as error:
            error.add_note(f"fuzz case {done} of seed {seed}: replay with FUZZ_SEED={seed}")
            raise
        done += 1
    print(f"fuzz: {done} cases, seed {seed}")
    return done
