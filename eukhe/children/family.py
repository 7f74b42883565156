"""A session that can have children, and be one: the session the public API and the daemon host.

Its cells may call `rlm.spawn`, `rlm.list_subagents`, `rlm.collect` and `rlm.delete` (host requests served by its
`Children`), and, run as a child, `rlm.answer`. `SessionFamily` is that part of a session (`SessionPart`), beside
its `SessionKernel`; `AgentSession` is the session with both (`agent_parts`). Where its children live is the
`ChildHost` given to `agent_parts` (None: in this process; the daemon's workers give each child a worker of its own).
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol, Unpack

from eukhe.children.host import ChildHost, InProcessHost
from eukhe.children.roster import CHILD_DOC, Children, Parent
from eukhe.children.run import AnswerSlot, prompt_run, run_child_code
from eukhe.core.gate import Admission
from eukhe.kernel.manager import HostHandler
from eukhe.kernel.session_kernel import KernelSession, SessionKernel
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
from eukhe.records.journal import JournalRecord
from eukhe.records.sandbox import SandboxChoice, SandboxPolicy
from eukhe.session.session import PartsMaker, Session, SessionMade, SessionPart


class SessionChildren:
    """`session.children`: spawn, list, collect and delete the session's children (the same as a cell's `rlm.*`)."""

    def __init__(self, roster: Children) -> None:
        self.roster = roster

    async def spawn(
        self,
        name: str,
        code: str | None = None,
        *,
        workspace: str = "shared",
        timeout_ms: int | None = None,
        prompt: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
    ) -> ChildRow:
        """Start child `name` whose run is `code` (one cell in its own kernel) or `prompt` (worked on by the `model`
        setting's model, or `model`, with the child session's tools), in the parent's directory (shared) or in a
        copy of it handed back at its end (isolated); stalled past `timeout_ms`. A prompt child's API key is
        `api_key`, else the variable the setting's `api_key_env` names."""
        params = {
            "name": name,
            "code": code,
            "workspace": workspace,
            "timeout_ms": timeout_ms,
            "prompt": prompt,
            "model": model,
        }
        request = convert(params, SpawnRequest, code="bad_args", what="a spawn")
        return await self.roster.spawn(request, api_key=api_key)

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


class SessionFamily:
    """A session's children, as its part: the roster (made on first use; a reopened session's come from its
    journal), the host requests its cells make of it, and, run as a child, where its `rlm.answer` lands."""

    def __init__(self, session: Session, host: ChildHost | None = None) -> None:
        self.session = session
        self._host = host
        self._roster: Children | None = None
        self.answer_slot = AnswerSlot()
        """Where this session's `rlm.answer` lands when it runs as a child."""

    @property
    def roster(self) -> Children:
        """The session's children (made on first use; a reopened session's come from its journal)."""
        if self._roster is None:
            session = self.session
            host = self._host if self._host is not None else InProcessHost(AgentSession, session.root)
            parent = Parent(
                session_id=session.id,
                cwd=session.cwd,
                workspaces=workspaces_root(session.root),
                budget_ms=session.budget_ms,
                sandbox=session.sandbox.policy,
            )
            self._roster = Children(parent, host, session.commit, session.job_table.clock)
        return self._roster

    def running(self) -> list[str]:
        """The children whose run is still going on (none when the roster was never made)."""
        return [] if self._roster is None else self._roster.running()

    def host_handlers(self) -> dict[str, HostHandler]:
        """The host requests of `rlm.spawn`, `rlm.list_subagents`, `rlm.collect`, `rlm.delete` and `rlm.answer`."""
        return {
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

    # ---- as a part of the session --------------------------------------------------------------------------------

    def after_reopen(self) -> None:
        """The children of the journal come back: those whose run did not end are resumed."""
        unfinished = self.roster.restore(self.session.view_state().of_type(CHILD_DOC))
        self.roster.resume(unfinished)

    def rewinding(self, entry_id: str | None) -> Callable[[], None]:
        """The children spawned after `entry_id` that still run are cancelled once the rewind (or fork) stopped the
        session's jobs (each then ends `cancelled`, is stopped and handed back, as a deleted child is); after a fork
        the others go on and belong to the fork."""
        if self._roster is None:
            return _nothing
        orphans = self._roster.spawned_after(self.session.state_after(entry_id).of_type(CHILD_DOC))
        return lambda: self._cancel(orphans)

    def _cancel(self, names: list[str]) -> None:
        if self._roster is not None and names:
            self._roster.cancel(names, "a rewind of the parent's conversation orphaned it")

    def records_left_behind(self, fork_id: str) -> list[JournalRecord]:
        """Every child still running goes on with the fork (or ends there, cancelled by it): this session records
        it as ended `cancelled` with reason `forked`, so a reopen of it neither resumes nor hands it back again."""
        return [] if self._roster is None else self._roster.left_to(fork_id)

    async def close(self) -> None:
        """End the children (before the kernel: a part closes before those it builds on)."""
        if self._roster is not None:
            await self._roster.close()


def _nothing() -> None:
    """Nothing to do."""


def _ignore(text: str) -> None:
    """A message nobody hears."""


def agent_parts(host: ChildHost | None = None) -> PartsMaker:
    """The parts of a session with a kernel and children: its `SessionKernel` (serving the children's host requests)
    and its `SessionFamily`, whose children `host` hosts (None: in this process, `InProcessHost`)."""

    def make(session: Session) -> Sequence[SessionPart]:
        family = SessionFamily(session, host)
        return [SessionKernel(session, handlers=family.host_handlers()), family]

    return make


class AgentSession(KernelSession):
    """A kernel session with children: a `Session` with the parts of `agent_parts` (by default: children in this
    process), whose face this class is."""

    def __init__(self, *, parts: PartsMaker | None = None, **made: Unpack[SessionMade]) -> None:
        super().__init__(parts=agent_parts() if parts is None else parts, **made)
        self.family = self.part(SessionFamily)
        """The session's children part."""

    @property
    def roster(self) -> Children:
        """The session's children (`SessionFamily.roster`)."""
        return self.family.roster

    def children_running(self) -> list[str]:
        """The children whose run is still going on (none when the roster was never made)."""
        return self.family.running()

    @property
    def children(self) -> SessionChildren:
        """The Python API's face of the roster."""
        return SessionChildren(self.family.roster)

    @property
    def answer_slot(self) -> AnswerSlot:
        """Where this session's `rlm.answer` lands when it runs as a child."""
        return self.family.answer_slot

    async def run_as_child(self, request: RunRequest, on_message: Callable[[str], None] | None = None) -> RunEnd:
        """This session's run as a child: its code as one cell, then its answer; or its prompt, worked on by a
        model whose `message_parent` texts go to `on_message`."""
        self.check_open()
        if request.prompt is not None:
            return await prompt_run()(self, request, on_message or _ignore)
        return await run_child_code(self, self.family.answer_slot, request)


class AgentSessions(Protocol):
    """What makes and reopens agent sessions: `AgentSession` itself, or a maker that gives each session its parts
    (the daemon's, `eukhe.daemon.children`)."""

    async def create(
        self, cwd: str | os.PathLike[str] | None, *, sandbox: SandboxPolicy | SandboxChoice | None = None
    ) -> AgentSession:
        """A new session in `cwd` (as `Session.create`)."""
        ...

    async def open(self, session_id: str, *, cwd: str | os.PathLike[str] | None = None) -> AgentSession:
        """Reopen saved session `session_id` (as `Session.open`)."""
        ...


__all__ = ["AgentSession", "AgentSessions", "SessionChildren", "SessionFamily", "agent_parts"]
