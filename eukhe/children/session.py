"""A session that can have children, and be one: the session the public API and the daemon host.

Its cells may call `rlm.spawn`, `rlm.list_subagents`, `rlm.collect` and `rlm.delete` (host requests served by its
`Children`), and, run as a child, `rlm.answer`. Where its children live is its `child_host` (in this process by
default; the daemon's workers give each child a worker of its own).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from eukhe.children.host import ChildHost, InProcessHost
from eukhe.children.roster import CHILD_DOC, Children, Parent
from eukhe.children.run import AnswerSlot, run_child_code
from eukhe.core.gate import Admission
from eukhe.kernel.manager import HostHandler
from eukhe.kernel.session import KernelSession
from eukhe.paths import workspaces_root
from eukhe.records.base import convert
from eukhe.records.children import (
    AnswerRequest,
    AnswerTaken,
    ChildName,
    ChildReport,
    ChildRow,
    CollectRequest,
    Reports,
    Roster,
    RunEnd,
    RunRequest,
    SpawnRequest,
)
from eukhe.records.jobs import Rewound
from eukhe.records.journal import JournalRecord


class SessionChildren:
    """`session.children`: spawn, list, collect and delete the session's children (the same as a cell's `rlm.*`)."""

    def __init__(self, roster: Children) -> None:
        self.roster = roster

    async def spawn(
        self, name: str, code: str, *, workspace: str = "shared", timeout_ms: int | None = None
    ) -> ChildRow:
        """Start child `name` whose run is `code` (one cell in its own kernel), in the parent's directory (shared)
        or in a copy of it handed back at its end (isolated); stalled past `timeout_ms`."""
        params = {"name": name, "code": code, "workspace": workspace, "timeout_ms": timeout_ms}
        return await self.roster.spawn(convert(params, SpawnRequest, code="bad_args", what="a spawn"))

    def list(self) -> builtins.list[ChildRow]:
        """The roster: every child's name, session, status, workspace and hand-back."""
        return self.roster.rows()

    async def collect(
        self, names: builtins.list[str] | None = None, timeout_ms: int | None = None
    ) -> builtins.list[ChildReport]:
        """Wait at most `timeout_ms` (within the blocking budget) for the named children (None: all); their
        reports: status, answer, error and hand-back."""
        params = {"names": names, "timeout_ms": timeout_ms}
        return await self.roster.collect(convert(params, CollectRequest, code="bad_args", what="a collect"))

    async def delete(self, name: str) -> ChildReport:
        """End the child, hand it back, take it off the roster; its last report."""
        return await self.roster.delete(convert({"name": name}, ChildName, code="bad_args", what="a delete").name)


class AgentSession(KernelSession):
    """A kernel session with children."""

    child_host: Callable[[AgentSession], ChildHost] | None = None
    """How this session's children are hosted (None: in this process, `InProcessHost`)."""

    _roster: Children | None = None
    _answer: AnswerSlot | None = None

    @property
    def roster(self) -> Children:
        """The session's children (made on first use; a reopened session's come from its journal)."""
        if self._roster is None:
            make_host = type(self).child_host
            host = make_host(self) if make_host is not None else InProcessHost(type(self), self.root)
            parent = Parent(
                session_id=self.id,
                cwd=self.cwd,
                workspaces=workspaces_root(self.root),
                budget_ms=self.budget_ms,
                sandbox=self.sandbox.policy,
            )
            self._roster = Children(parent, host, self.commit, self.job_table.clock)
        return self._roster

    def children_running(self) -> list[str]:
        """The children whose run is still going on (none when the roster was never made)."""
        return [] if self._roster is None else self._roster.running()

    @property
    def children(self) -> SessionChildren:
        """The Python API's face of the roster."""
        return SessionChildren(self.roster)

    @property
    def answer_slot(self) -> AnswerSlot:
        """Where this session's `rlm.answer` lands when it runs as a child."""
        if self._answer is None:
            self._answer = AnswerSlot()
        return self._answer

    async def run_as_child(self, request: RunRequest) -> RunEnd:
        """This session's run as a child: its code as one cell, then its answer."""
        self.check_open()
        return await run_child_code(self, self.answer_slot, request)

    def host_handlers(self) -> dict[str, HostHandler]:
        return {
            **super().host_handlers(),
            "children.spawn": self._spawn,
            "children.list": self._list,
            "children.collect": self._collect,
            "children.delete": self._delete,
            "child.answer": self._take_answer,
        }

    async def _spawn(self, admission: Admission) -> Any:
        request = convert(admission.params, SpawnRequest, code="bad_args", what="rlm.spawn's arguments")
        return (await self.roster.spawn(request)).to_json()

    async def _list(self, admission: Admission) -> Any:
        return Roster(children=self.roster.rows()).to_json()

    async def _collect(self, admission: Admission) -> Any:
        request = convert(admission.params or {}, CollectRequest, code="bad_args", what="rlm.collect's arguments")
        return Reports(reports=await self.roster.collect(request)).to_json()

    async def _delete(self, admission: Admission) -> Any:
        request = convert(admission.params, ChildName, code="bad_args", what="rlm.delete's arguments")
        return (await self.roster.delete(request.name)).to_json()

    async def _take_answer(self, admission: Admission) -> Any:
        request = convert(admission.params, AnswerRequest, code="bad_args", what="rlm.answer's arguments")
        self.answer_slot.take(request.value)
        return AnswerTaken(answered=True).to_json()

    async def navigate_tree(self, entry_id: str | None) -> Rewound:
        """A rewind: as the session's, and the children spawned after `entry_id` that still run are cancelled
        (each then ends `cancelled`, is stopped and handed back, as a deleted child is), as its jobs are stopped."""
        orphans = self._children_after(entry_id)
        rewound = await super().navigate_tree(entry_id)
        self._cancel_orphans(orphans)
        return rewound

    async def fork(self, entry_id: str | None, *, session_id: str | None = None) -> Rewound:
        """A fork: as the session's; the children spawned after `entry_id` that still run are cancelled, the others
        go on and belong to the fork."""
        orphans = self._children_after(entry_id)
        rewound = await super().fork(entry_id, session_id=session_id)
        self._cancel_orphans(orphans)
        return rewound

    def _records_left_behind(self, fork_id: str) -> list[JournalRecord]:
        """Every child still running goes on with the fork (or ends there, cancelled by it): this session records
        it as ended `cancelled` with reason `forked`, so a reopen of it neither resumes nor hands it back again."""
        records = super()._records_left_behind(fork_id)
        if self._roster is not None:
            records += self._roster.left_to(fork_id)
        return records

    def _children_after(self, entry_id: str | None) -> list[str]:
        if self._roster is None:
            return []
        self._check_target(entry_id)
        return self._roster.spawned_after(self.state_after(entry_id).of_type(CHILD_DOC))

    def _cancel_orphans(self, names: list[str]) -> None:
        if self._roster is not None and names:
            self._roster.cancel(names, "a rewind of the parent's conversation orphaned it")

    def _after_reopen(self) -> None:
        super()._after_reopen()
        unfinished = self.roster.restore(self.view_state().of_type(CHILD_DOC))
        self.roster.resume(unfinished)

    async def _close_hosted(self) -> None:
        if self._roster is not None:
            await self._roster.close()
        await super()._close_hosted()


__all__ = ["AgentSession", "SessionChildren"]
