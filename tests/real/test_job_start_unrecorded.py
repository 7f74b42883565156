"""A job whose start record cannot be written (a disk that refuses the job's node) is killed at once, with its whole
process group: without its node, a reopen after a crash could not end the group, which would live on with its host
dead. (Found by the soak: a `sleep 600 &` of such a job outlived its session's close.)

The journal's own fault-injection hook refuses the commits that hold a job node; the job, its processes and the
session are real.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from eukhe.procs import alive
from eukhe.records.jobs import Detached, Settled
from eukhe.records.journal import DocPut, JournalRecord
from eukhe.records.sandbox import UNCONFINED
from eukhe.session.session import Session
from eukhe.store.journal import JournalError
from tests.real.kernel_support import run, until

pytestmark = pytest.mark.real


def test_a_job_whose_start_cannot_be_recorded_is_killed_with_its_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "background.pid"

    async def scenario() -> None:
        session = await Session.create(tmp_path, root=tmp_path / "sessions", sandbox=UNCONFINED)
        journal = session._ledger.journal

        def full_for_job_nodes(records: Sequence[JournalRecord]) -> None:
            if any(isinstance(r, DocPut) and r.type == "eukhe.job" for r in records):
                # The disk is full by the time the job's background process runs (so there is a group to end).
                deadline = time.monotonic() + 10
                while not (pidfile.exists() and pidfile.read_text().endswith("\n")) and time.monotonic() < deadline:
                    time.sleep(0.01)
                raise JournalError(journal.path, "[Errno 28] No space left on device")

        journal._before_write = full_for_job_nodes  # type: ignore[method-assign]
        try:
            command = f"sleep 600 & echo $! > {pidfile}; sleep 600"
            answer = await session.execute_bash_and_wait(command, budget_ms=0)
            assert isinstance(answer, Detached), answer
            ended = await session.jobs.wait(answer.job, timeout_ms=20_000)
            assert isinstance(ended, Settled) and ended.killed, ended
            background = int(pidfile.read_text())
            await until(lambda: not alive(background), what="the job's background process to end")
        finally:
            await session.close()

    run(scenario())
