"""This process's signal state, read and put back: an in-process CLI run sets its own SIGINT handler (the CLI
always hears Ctrl-C), and what a test leaves would reach every process a later test spawns."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

SignalState = tuple[tuple[tuple[int, object], ...], frozenset[int], str]
CATCHABLE = sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP, signal.SIGALRM})
"""Every signal a handler can be set for, but SIGALRM: pytest-timeout's, which it sets and clears around a test."""


def signal_state() -> SignalState:
    """The handlers (as Python sees them), the calling thread's blocked mask, and the kernel's own view of what is
    ignored and blocked (/proc: a disposition set below Python shows there)."""
    handlers = tuple((number, signal.getsignal(number)) for number in CATCHABLE)
    with open("/proc/self/status") as status:
        kernel = " ".join(line.strip() for line in status if line.startswith(("SigIgn:", "SigBlk:")))
    return handlers, frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, ())), kernel


def put_back(state: SignalState) -> list[str]:
    """Restore the handlers and the mask of `state`; the names of the signals whose handler had changed."""
    changed: list[str] = []
    for number, handler in state[0]:
        if signal.getsignal(number) is not handler and handler is not None:
            signal.signal(number, handler)  # type: ignore[arg-type]
            changed.append(signal.Signals(number).name)
    signal.pthread_sigmask(signal.SIG_SETMASK, state[1])
    return changed


@contextmanager
def signal_state_kept() -> Iterator[None]:
    """Run the body, then put this process's signal handlers and mask back as they were (main thread only)."""
    before = signal_state()
    try:
        yield
    finally:
        put_back(before)
