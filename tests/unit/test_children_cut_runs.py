"""A child whose run stops without an end (its host or its parent goes away: the end is decided when the parent
reopens): a delete of it is refused at once, never left waiting for an end that cannot come."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from eukhe.children.roster import Children, Parent
from eukhe.clock import MonotonicClock
from eukhe.errors import CodedError
from eukhe.records.children import RunEnd, RunRequest, SpawnRequest
from eukhe.records.journal import JournalRecord
from eukhe.records.sandbox import SandboxPolicy
from eukhe.session.session import SessionClosedError

HANG_S = 30.0  # only a hang reaches it


class GoingAwayHost:
    """A child host whose runs wait until `go_away` and then fail as a daemon that stops does."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()
        self.started = asyncio.Event()
        self.stopped: list[str] = []

    async def start(self, cwd: Path, sandbox: SandboxPolicy) -> str:
        return "child-session"

    async def run(self, session_id: str, request: RunRequest, on_message: Callable[[str], None]) -> RunEnd:
        self.started.set()
        await self.gone.wait()
        raise CodedError("daemon_stopping", "the daemon is stopping")

    async def stop(self, session_id: str) -> None:
        self.stopped.append(session_id)

    async def stopping(self) -> bool:
        return self.gone.is_set()


async def running_child(tmp_path: Path) -> tuple[GoingAwayHost, Children]:
    """A roster whose child `worker` is in its run."""
    host = GoingAwayHost()
    parent = Parent(session_id="parent", cwd=tmp_path, workspaces=tmp_path / "workspaces", budget_ms=60_000)
    journal: list[JournalRecord] = []
    children = Children(parent, host, journal.extend, MonotonicClock())
    await children.spawn(SpawnRequest(name="worker", code="1"))
    await asyncio.wait_for(host.started.wait(), HANG_S)
    return host, children


async def refused_delete(children: Children) -> None:
    with pytest.raises(SessionClosedError, match="decided when the parent reopens"):
        await asyncio.wait_for(children.delete("worker"), HANG_S)


def test_a_delete_of_a_child_whose_run_its_host_going_away_cut_is_refused_not_left_waiting(tmp_path: Path) -> None:
    async def scenario() -> None:
        host, children = await running_child(tmp_path)
        host.gone.set()
        await asyncio.wait_for(asyncio.gather(*children._runs.values()), HANG_S)
        await refused_delete(children)
        assert children.report("worker").status == "running"  # its end is the reopened parent's to decide

    asyncio.run(scenario())


def test_a_delete_after_the_parent_closed_is_refused_not_left_waiting(tmp_path: Path) -> None:
    async def scenario() -> None:
        host, children = await running_child(tmp_path)
        await asyncio.wait_for(children.close(), HANG_S)
        assert host.stopped == ["child-session"]
        await refused_delete(children)

    asyncio.run(scenario())
