"""A parent's children: spawn, roster, collect, delete, and each child's end: stop, then hand back.

Each child is kept as an `eukhe.child` state document in the parent's journal (`ChildState`), written at its spawn,
at its run's end and after its hand-back, so a parent reopened after a crash finds its children. A child whose run
was cut by the parent's host stopping is ended then (`failed`, `host_stopped`) and handed back; an isolated child
keeps its copy and base until that hand-back.

The end of a child is always, in this order: its status is recorded; the child is stopped (its worker, kernel and
jobs end: nothing of it writes after this); an isolated child's copy is handed back (one hand-back at a time per
parent); the outcome is recorded and its waiters wake.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from eukhe.children.errors import ChildExistsError, ChildNameError, ModelNotConfiguredError, UnknownChildError
from eukhe.children.host import ChildHost
from eukhe.clock import Clock, wait_within
from eukhe.core.job import blocking_span
from eukhe.errors import EukheError, InputError
from eukhe.records.base import convert
from eukhe.records.children import (
    ChildError,
    ChildReport,
    ChildRow,
    ChildState,
    ChildStatus,
    CollectRequest,
    RunEnd,
    RunRequest,
    SpawnRequest,
)
from eukhe.records.journal import DocPut, DocRetire, JournalRecord
from eukhe.records.sandbox import UNCONFINED, SandboxPolicy
from eukhe.records.workspace import HandbackOutcome, HandbackReport
from eukhe.session.session import SessionClosedError
from eukhe.session.settings import load_model, user_settings_path
from eukhe.workspace import (
    MAX_WORKSPACE_FILES,
    HandbackError,
    WorkspaceLayout,
    create_workspace,
    hand_back,
    remove_retired,
)
from eukhe.workspace.durable import CrashHook, no_hook, remove_tree

log = logging.getLogger("eukhe.children")

CHILD_DOC = "eukhe.child"
"""The state document of one child in its parent's journal (key: the child's name)."""

PROMPT_RESUMES = 2
"""How many times a prompt child whose run was cut (its worker died) takes up its conversation again."""

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""A child's name: one path component of its workspace, up to 64 letters, digits and `_.-`."""

Commit = Callable[[list[JournalRecord]], object]


@dataclass(frozen=True, slots=True)
class Parent:
    """What the roster needs of its parent session: who it is, where it works, how long a call may block."""

    session_id: str
    cwd: Path
    workspaces: Path
    budget_ms: int
    sandbox: SandboxPolicy = UNCONFINED
    """The parent's policy: a shared child gets it; an isolated one's only writable root is its copy."""

    def child_policy(self, workspace: str) -> SandboxPolicy:
        """The sandbox policy of a child working in `workspace` ("shared" or "isolated")."""
        if workspace != "isolated":
            return self.sandbox
        return msgspec.structs.replace(self.sandbox, writable_roots=[])


class Children:
    """The children of one parent session."""

    max_files = MAX_WORKSPACE_FILES
    """An isolated spawn of a directory that lists more files is refused (`workspace_too_large`, naming shared)."""
    handback_hook: CrashHook = staticmethod(no_hook)
    """Called at each named point of a hand-back, just before its rename (tests look at the world there)."""

    def __init__(self, parent: Parent, host: ChildHost, commit: Commit, clock: Clock) -> None:
        self._parent = parent
        self._host = host
        self._commit = commit
        self._clock = clock
        self._states: dict[str, ChildState] = {}
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._ended: dict[str, asyncio.Future[None]] = {}
        self._cancelling: dict[str, str] = {}  # a child whose run is cancelled on purpose: why
        self._requests: dict[str, RunRequest] = {}  # a spawned child's run, until it starts (a key stays in memory)
        self._handing_back = asyncio.Lock()
        self._closed = False

    # --- the roster -----------------------------------------------------------------------------------------------

    def rows(self) -> list[ChildRow]:
        """Every child, in spawn order."""
        return [state.row() for state in self._states.values()]

    def running(self) -> list[str]:
        """The children whose run (or end, or hand-back) is still going on: their parent is busy."""
        return [name for name, task in self._runs.items() if not task.done()]

    def report(self, name: str) -> ChildReport:
        """One child's report as it stands."""
        return self._state(name).report()

    def _state(self, name: str) -> ChildState:
        try:
            return self._states[name]
        except KeyError:
            raise UnknownChildError(name) from None

    def _layout(self, name: str) -> WorkspaceLayout:
        """Where a new child's workspace goes."""
        return WorkspaceLayout.at(self._parent.workspaces, self._parent.session_id, name)

    def _layout_of(self, state: ChildState) -> WorkspaceLayout:
        """Where a child's workspace is: as its spawn recorded it (a fork of the parent keeps its children's)."""
        if state.copy is None:
            return self._layout(state.name)
        directory = Path(state.copy.workspace_dir)
        return WorkspaceLayout.at(directory.parent.parent, directory.parent.name, directory.name)

    def _record(self, state: ChildState) -> None:
        """Keep the child's state, in memory and in the parent's journal."""
        self._states[state.name] = state
        self._commit([DocPut(type=CHILD_DOC, key=state.name, value=msgspec.to_builtins(state))])

    def _record_end(self, state: ChildState) -> None:
        """`_record` on the way to an end: a commit that fails (a full disk) does not stop the end. The state is
        kept in memory; the journal keeps the last state it took, so a reopen ends the child again (a hand-back
        reruns to the same result)."""
        try:
            self._record(state)
        except EukheError as error:
            log.error("child %s: its state could not be recorded: %s", state.name, error)

    # --- spawn ----------------------------------------------------------------------------------------------------

    async def spawn(self, request: SpawnRequest, *, api_key: str | None = None) -> ChildRow:
        """Start a child: its workspace (isolated: the copy), its session, then its run in the background. A prompt
        child's API key is `api_key` (the asking client's), else the variable the `model` setting names."""
        if self._closed:
            raise SessionClosedError("the parent session is closing: no child starts")
        if not NAME.fullmatch(request.name):
            raise ChildNameError(request.name)
        if request.name in self._states:
            raise ChildExistsError(request.name)
        run = run_request(request, api_key)
        self._reserve(request.name)
        try:
            cwd, copy = self._parent.cwd, None
            if request.workspace == "isolated":
                layout = self._layout(request.name)
                copy = await asyncio.to_thread(create_workspace, self._parent.cwd, layout, max_files=self.max_files)
                cwd = layout.copy
            try:
                session_id = await self._host.start(cwd, self._parent.child_policy(request.workspace))
            except BaseException:
                if copy is not None:  # no child works in it: the copy goes (the parent's files are untouched)
                    await asyncio.to_thread(remove_tree, self._layout(request.name).dir)
                raise
        except BaseException:
            del self._ended[request.name]
            raise
        state = ChildState(
            name=request.name,
            session=session_id,
            status="running",
            workspace=request.workspace,
            cwd=str(cwd),
            timeout_ms=request.timeout_ms,
            code=request.code,
            copy=copy,
            prompt=request.prompt,
            model=None if run.provider is None else run.provider.name,
        )
        self._requests[request.name] = run
        self._record(state)
        self._runs[request.name] = asyncio.create_task(self._run(state), name=f"child {request.name}")
        return state.row()

    def _reserve(self, name: str) -> None:
        """Hold the name while the spawn makes its workspace and session (a second spawn of it is refused)."""
        if name in self._ended:
            raise ChildExistsError(name)
        self._ended[name] = asyncio.get_running_loop().create_future()

    async def _run(self, state: ChildState) -> None:
        """The child's run, then its end."""
        request = self._requests.pop(state.name, None) or RunRequest(code=state.code, timeout_ms=state.timeout_ms)
        try:
            end = await self._run_resuming(state, request)
        except asyncio.CancelledError:
            why = self._cancelling.get(state.name)
            if why is None:
                raise  # the parent closes: the child's end is decided when the parent reopens
            end = RunEnd(status="failed", error=ChildError(reason="cancelled", message=why))
        except EukheError as error:
            if await self._host.stopping():
                return  # the host goes away: the child's end is decided when the parent reopens
            if state.prompt is not None:  # its loop was cut (its worker died): its transcript is its session's
                cut = ChildError(reason="interrupted", message=f"the child's loop was cut: {error}")
                end = RunEnd(status="interrupted", error=cut)
            else:
                end = RunEnd(status="failed", error=ChildError(reason="host_stopped", message=str(error)))
        except Exception as error:  # a bug: the child still ends (stopped, handed back), its report says why
            log.exception("child %s: its run failed", state.name)
            end = RunEnd(
                status="failed", error=ChildError(reason="internal", message=f"{type(error).__name__}: {error}")
            )
        cancelled = end.error is not None and end.error.reason == "cancelled"
        status: ChildStatus = "cancelled" if cancelled else end.status
        now = self._states.get(state.name, state)  # with the messages it sent meanwhile
        await self._end(
            msgspec.structs.replace(now, status=status, answer=end.answer, error=end.error, usage=end.usage)
        )

    async def _run_resuming(self, state: ChildState, request: RunRequest) -> RunEnd:
        """The host's run of the child. A prompt child whose run was cut (its worker died: the host failed, and is
        not stopping) runs again, at most PROMPT_RESUMES times: its loop takes up its conversation from its
        session's journal (the host reopens the session), with the key this roster holds in memory."""
        resumes = 0
        while True:
            try:
                return await self._host.run(state.session, request, lambda text: self._heard(state.name, text))
            except EukheError as error:
                if request.prompt is None or resumes >= PROMPT_RESUMES or await self._host.stopping():
                    raise
                resumes += 1
                log.warning("child %s: its run was cut (%s); it resumes from its journal", state.name, error)

    def _heard(self, name: str, text: str) -> None:
        """A prompt child's `message_parent(text)`: kept on its row (and in the parent's journal) while it runs."""
        state = self._states.get(name)
        if state is None or state.status != "running":
            return
        self._record_end(msgspec.structs.replace(state, messages=[*state.messages, text]))

    async def _end(self, state: ChildState) -> None:
        """Record the status, stop the child, hand an isolated child back, record the outcome, wake the waiters.
        Invariant: the waiters wake whatever fails on the way (a collect or delete never waits for an end forever)."""
        retired: WorkspaceLayout | None = None
        try:
            retired = await self._stop_and_hand_back(state)
        finally:
            ended = self._ended.get(state.name)
            if ended is not None and not ended.done():
                ended.set_result(None)
        if retired is not None:  # the retired base and copy go after the waiters woke
            try:
                await asyncio.to_thread(remove_retired, retired)
            except OSError as error:
                log.warning("child %s: removing its retired base and copy: %s", state.name, error)

    async def _stop_and_hand_back(self, state: ChildState) -> WorkspaceLayout | None:
        """The end's steps up to its recorded outcome; the layout whose retired base and copy are left to remove."""
        self._record_end(state)
        try:
            await self._host.stop(state.session)
        except EukheError as error:  # e.g. its worker is gone already: nothing of it runs
            log.warning("child %s: stopping its session %s: %s", state.name, state.session, error)
        handback: HandbackOutcome | None = None
        layout = self._layout_of(state)
        if state.workspace == "isolated":
            async with self._handing_back:
                try:
                    handback = await asyncio.to_thread(hand_back, layout, hook=self.handback_hook, remove_now=False)
                except HandbackError as error:
                    handback = error.failure()
                    log.error("child %s: hand-back failed at %s: %s", state.name, error.path, error.reason)
        self._record_end(msgspec.structs.replace(state, handback=handback, ended=True))
        return layout if isinstance(handback, HandbackReport) else None

    # --- collect, delete ------------------------------------------------------------------------------------------

    async def collect(self, request: CollectRequest) -> list[ChildReport]:
        """Wait at most `timeout_ms` (within the blocking budget) for the named children's ends (None: all);
        their reports (a child still running reports `running`; one a delete took off the roster while this waited is
        left out: that delete answered its last report)."""
        names = list(self._states) if request.names is None else request.names
        for name in names:
            self._state(name)
        waiting = [self._ended[name] for name in names if not self._ended[name].done()]
        if waiting:
            together = asyncio.ensure_future(asyncio.gather(*(asyncio.shield(w) for w in waiting)))
            try:
                await wait_within(self._clock, together, blocking_span(request.timeout_ms, self._parent.budget_ms))
            finally:
                if not together.done():
                    together.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await together
        return [state.report() for name in names if (state := self._states.get(name)) is not None]

    async def delete(self, name: str) -> ChildReport:
        """End the child (its run is cancelled if it still runs), hand it back, and take it off the roster; its
        last report. Its session stays on disk; an isolated child's workspace keeps `conflicts/` and its record.
        A child whose run its host or its parent going away cut is refused (`session_closed`): its end is the
        reopened parent's."""
        self._state(name)
        ended = self._ended[name]
        self.cancel([name], "the parent deleted it")
        await self._end_of(name, ended)
        if self._ended.get(name) is not ended:  # another delete of it took it off the roster meanwhile
            raise UnknownChildError(name)
        report = self._states[name].report()
        del self._states[name]
        del self._ended[name]
        self._runs.pop(name, None)
        self._cancelling.pop(name, None)
        self._commit([DocRetire(type=CHILD_DOC, key=name)])
        return report

    async def _end_of(self, name: str, ended: asyncio.Future[None]) -> None:
        """Wait for the child's end. A run that stops without one (its host or its parent is going away: the end is
        decided when the parent reopens) is refused: nothing would ever wake this wait."""
        run = self._runs.get(name)
        if run is not None and not ended.done():
            await asyncio.wait([ended, run], return_when=asyncio.FIRST_COMPLETED)  # cancelled: neither is
        if not ended.done():
            raise SessionClosedError(
                f"child {name!r}: its run was cut by its host or its parent going away; "
                "its end is decided when the parent reopens"
            )
        await asyncio.shield(ended)

    def cancel(self, names: list[str], why: str) -> list[str]:
        """Cancel the runs of these children that still run (each then ends `cancelled`, is stopped and handed
        back, in the background); the names cancelled."""
        cancelled = []
        for name in names:
            run = self._runs.get(name)
            if run is not None and not run.done() and self._states[name].status == "running":
                self._cancelling[name] = why
                run.cancel()
                cancelled.append(name)
        return cancelled

    def left_to(self, fork_id: str) -> list[JournalRecord]:
        """The records a parent that forks keeps for its children that have not ended: each ended `cancelled` with
        reason `forked` (the fork owns them now). Nothing in memory changes: this object goes on in the fork."""
        message = f"the parent forked: the child went on in session {fork_id}"
        return [
            DocPut(
                type=CHILD_DOC,
                key=name,
                value=msgspec.to_builtins(
                    msgspec.structs.replace(
                        state, status="cancelled", ended=True, error=ChildError(reason="forked", message=message)
                    )
                ),
            )
            for name, state in self._states.items()
            if not state.ended
        ]

    def spawned_after(self, kept: dict[str, Any]) -> list[str]:
        """The children not among the documents of a state (the state a rewind goes back to): spawned after it."""
        return [name for name in self._states if name not in kept]

    # --- the parent's life ----------------------------------------------------------------------------------------

    def restore(self, documents: dict[str, Any]) -> list[ChildState]:
        """Load the children a reopened parent kept; the ones whose end did not finish (to `resume`)."""
        unfinished = []
        for key, value in documents.items():
            state = convert(value, ChildState, code="journal_format", what=f"child {key!r} of the journal")
            self._states[state.name] = state
            ended = asyncio.get_running_loop().create_future()
            self._ended[state.name] = ended
            if state.ended:
                ended.set_result(None)
            else:
                unfinished.append(state)
        return unfinished

    def resume(self, unfinished: list[ChildState]) -> None:
        """End the children a stopped host left: a run still `running` was cut (`failed`, `host_stopped`); then
        each is stopped and handed back as at any end (a hand-back cut by a crash reruns to the same result)."""
        cut = ChildError(reason="host_stopped", message="the parent's host stopped during the child's run")
        for left in unfinished:
            state = left
            if left.status == "running":  # a prompt child's loop is not resumed: its transcript stays in its session
                status: ChildStatus = "interrupted" if left.prompt is not None else "failed"
                state = msgspec.structs.replace(left, status=status, error=cut)
            self._runs[state.name] = asyncio.create_task(self._end(state), name=f"child {state.name} end")

    async def close(self) -> None:
        """The parent closes: the runs are cut and the children stopped (no child outlives its parent's host);
        their ends are decided when the parent reopens. Ends already under way finish first."""
        self._closed = True
        for name, task in self._runs.items():
            if not task.done() and self._states[name].status == "running":
                task.cancel()
        await asyncio.gather(*self._runs.values(), return_exceptions=True)
        for state in self._states.values():
            if state.status == "running":
                with contextlib.suppress(EukheError):
                    await self._host.stop(state.session)


def run_request(request: SpawnRequest, api_key: str | None) -> RunRequest:
    """A spawn's run: its code, or its prompt with the model to ask and its key (exactly one of code and prompt;
    a prompt needs the `model` setting and a key, `api_key` or the variable the setting names)."""
    if request.code is not None and request.prompt is not None:
        raise InputError("bad_args", "a spawn takes code or prompt, not both", field="prompt")
    if request.code is None and request.prompt is None:
        raise InputError("bad_args", "a spawn takes code or prompt: neither was given", field="code")
    if request.code is not None:
        return RunRequest(code=request.code, timeout_ms=request.timeout_ms)
    provider = load_model()
    if provider is None:
        raise ModelNotConfiguredError(
            f"a prompt child needs the `model` setting in {user_settings_path()} "
            '(e.g. {"base_url": "https://.../v1", "name": "MODEL", "api_key_env": "OPENAI_API_KEY"})',
            field="model",
        )
    key = api_key or os.environ.get(provider.api_key_env)
    if not key:
        raise ModelNotConfiguredError(
            f"the `model` setting's api_key_env names {provider.api_key_env}, which is unset: neither the client "
            "that asked for the spawn nor this process (the daemon's worker, or the Python API's) has it",
            field="model.api_key_env",
        )
    if request.model is not None:
        provider = msgspec.structs.replace(provider, name=request.model)
    return RunRequest(prompt=request.prompt, timeout_ms=request.timeout_ms, provider=provider, api_key=key)
