"""The supervisor's worker start (daemon): a start cancelled before the ready line leaves no worker process behind."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from eukhe.daemon.supervisor import Supervisor

ATTEMPTS = 5
"""Starts tried until one is cancelled before its worker's ready line."""


@pytest.mark.real
@pytest.mark.parametrize("start", ["fork", "exec"])
def test_a_cancelled_worker_start_kills_and_reaps_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    monkeypatch.setenv("EUKHE_WORKER_START", start)
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("EUKHE_SESSION_DIR", raising=False)
    (tmp_path / "sock").mkdir(mode=0o700)
    project = tmp_path / "project"
    project.mkdir()

    async def scenario() -> int | None:
        supervisor = Supervisor(tmp_path / "sock" / "daemon.sock")
        assert (supervisor.fork_server is not None) == (start == "fork")
        try:
            for _ in range(ATTEMPTS):
                spawning = asyncio.create_task(supervisor._spawn(None, str(project)))
                deadline = asyncio.get_running_loop().time() + 60
                while not supervisor.workers:  # the worker is started and registered
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0)
                (placeholder,) = supervisor.workers.values()
                spawning.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    worker = await spawning
                    # Its ready line came in before the cancel could land (a loaded machine): stop it, try again.
                    await supervisor._stop_worker(worker)
                    continue
                assert not supervisor.workers
                return placeholder.process.returncode
            raise AssertionError(f"in {ATTEMPTS} starts, every ready line came in before the cancel")
        finally:
            if supervisor.fork_server is not None:
                await supervisor.fork_server.stop()

    assert asyncio.run(scenario()) is not None
