"""`Session.close(force=...)` and `Session.delete(force=...)` on the Python API: refused while jobs run
unless forced (and then nothing changes); a forced one kills them; a delete removes the session's dir, its
artifacts and its workspaces."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eukhe.api import Session, SessionSettings
from eukhe.errors import EukheError, error_code, error_details
from eukhe.paths import workspaces_root
from eukhe.procs import group_alive
from eukhe.records.jobs import Detached
from eukhe.store.dirs import UnknownSessionError

pytestmark = pytest.mark.real

SETTINGS = SessionSettings(tool_blocking_budget_ms=5000)


def run(coro: object) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


def test_close_without_force_refuses_while_jobs_run_and_force_kills_them(tmp_path: Path) -> None:
    async def body() -> None:
        session = await Session.create(tmp_path, settings=SETTINGS, root=tmp_path / "sessions")
        running = await session.execute_bash_and_wait("sleep 300", budget_ms=0)
        assert isinstance(running, Detached)
        group = session.job_table.get(running.job).owner.pgid  # type: ignore[union-attr, attr-defined]
        with pytest.raises(EukheError) as refused:
            await session.close(force=False)
        assert error_code(refused.value) == "session_has_jobs"
        assert error_details(refused.value) == {"jobs": [running.job]}
        assert not session.closed and group_alive(group)
        assert (await session.execute_bash_and_wait("echo still open")).output.text == "still open\n"
        await session.close(force=True)
        assert session.closed and not group_alive(group)

    run(body())


def test_delete_refuses_while_jobs_run_then_removes_the_dir_artifacts_and_workspaces(tmp_path: Path) -> None:
    root = tmp_path / "sessions"

    async def body() -> None:
        session = await Session.create(tmp_path, settings=SETTINGS, root=root)
        big = await session.execute_bash_and_wait("seq 1 100000")
        assert big.output.artifact is not None and Path(big.output.artifact).exists()
        workspaces = workspaces_root(root) / session.id / "child"
        workspaces.mkdir(parents=True)
        running = await session.execute_bash_and_wait("sleep 300", budget_ms=0)
        group = session.job_table.get(running.job).owner.pgid  # type: ignore[union-attr, attr-defined]
        with pytest.raises(EukheError) as refused:
            await session.delete()
        assert error_code(refused.value) == "session_has_jobs"
        assert (root / session.id).is_dir() and workspaces.is_dir() and not session.closed
        removed = await session.delete(force=True)
        assert sorted(removed) == sorted([str(root / session.id), str(workspaces_root(root) / session.id)])
        assert not group_alive(group)
        assert not (root / session.id).exists()
        assert not (workspaces_root(root) / session.id).exists()
        assert not Path(big.output.artifact).exists()
        assert not [p for p in root.iterdir() if p.name.startswith(".")], "nothing left beside the sessions"
        with pytest.raises(UnknownSessionError):
            await Session.open(session.id, root=root)

    run(body())


def test_a_closed_session_reopened_can_be_deleted(tmp_path: Path) -> None:
    root = tmp_path / "sessions"

    async def body() -> None:
        session = await Session.create(tmp_path, settings=SETTINGS, root=root)
        await session.close()
        reopened = await Session.open(session.id, root=root)
        assert await reopened.delete() == [str(root / session.id)]
        assert not (root / session.id).exists()

    run(body())
