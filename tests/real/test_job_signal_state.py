"""A job hears Ctrl-C, Ctrl-\\ and a kill's SIGTERM whatever its host does with them.

A host started in a shell's background (or by a program that ignores Ctrl-C) ignores SIGINT and SIGQUIT; an ignore
and a blocked mask are inherited across exec, and a shell cannot undo an ignore it inherited. So the job's process
gets the default action and an unblocked mask for them before its exec. Each test puts its own process's signal
state back.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from eukhe.procs import JOB_SIGNALS
from eukhe.records.jobs import Settled
from eukhe.records.sandbox import UNCONFINED, SandboxPolicy
from eukhe.sandbox.bwrap import available
from eukhe.session.session import Session

pytestmark = pytest.mark.real

REPORT = "grep -E '^Sig(Ign|Blk):' /proc/self/status"


def _mask(line: str) -> int:
    return int(line.split()[1], 16)


def _bits(numbers: tuple[int, ...]) -> int:
    return sum(1 << (number - 1) for number in numbers)


@contextmanager
def deaf_host() -> Iterator[None]:
    """This process ignores SIGINT and SIGTERM and blocks SIGQUIT, as a host might; all put back after."""
    before = {number: signal.getsignal(number) for number in JOB_SIGNALS}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    was_blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGQUIT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, was_blocked)
        for number, handler in before.items():
            signal.signal(number, handler)


def _sandboxes() -> list[object]:
    try:
        works = bool(available())
    except Exception:
        works = False
    confined = pytest.param(SandboxPolicy(), id="confined", marks=pytest.mark.skipif(not works, reason="no bwrap"))
    return [pytest.param(UNCONFINED, id="unconfined"), confined]


@pytest.mark.parametrize("sandbox", _sandboxes())
@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "tty"])
def test_a_job_of_a_host_that_ignores_or_blocks_its_signals_hears_them(
    tmp_path: Path, sandbox: object, tty: bool
) -> None:
    async def scenario() -> Settled:
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        session = await Session.create(cwd, root=tmp_path / "sessions", sandbox=sandbox)  # type: ignore[arg-type]
        try:
            with deaf_host():
                answer = await session.execute_bash_and_wait(REPORT, 30_000, tty=tty)
            assert isinstance(answer, Settled), answer
            return answer
        finally:
            await session.close()

    answer = asyncio.run(scenario())
    lines = answer.output.text.replace("\r", "").splitlines()
    ignored = _mask(next(line for line in lines if line.startswith("SigIgn:")))
    blocked = _mask(next(line for line in lines if line.startswith("SigBlk:")))
    assert ignored & _bits(JOB_SIGNALS) == 0, lines
    assert blocked & _bits(JOB_SIGNALS) == 0, lines
