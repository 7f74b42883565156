"""The records of children (spec S3 "A subagent's workspace"): a spawn's arguments, a child's roster row
and report, the end of its run, and the state document a parent's journal keeps per child.

A child is a session of its own (its worker, kernel and jobs) whose run is a piece of code executed as one cell in
its kernel. Its `answer` is any JSON value: what the code passed to `rlm.answer`, else its last expression's value.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from eukhe.records.base import Record
from eukhe.records.settings import NonNegative
from eukhe.records.workspace import HandbackOutcome, WorkspaceCopy

ChildStatus = Literal["running", "answered", "failed", "stalled", "cancelled"]
"""`running` until the run ends: `answered` (it finished), `failed` (it raised, or its kernel or host died),
`stalled` (past its `timeout_ms`), `cancelled` (the parent deleted it while it ran)."""
WorkspaceMode = Literal["shared", "isolated"]
ChildErrorReason = Literal[
    "exception", "interrupted", "kernel_died", "stalled", "cancelled", "host_stopped", "forked", "internal"
]


class SpawnRequest(Record):
    """`rlm.spawn(name, code, workspace, timeout_ms)`: start a child whose run is `code`, executed as a cell in the
    child's kernel; `isolated` gives it a copy of the parent's files, handed back path by path at its end."""

    name: str
    code: str
    workspace: WorkspaceMode = "shared"
    timeout_ms: NonNegative | None = None


class CollectRequest(Record):
    """`rlm.collect(names, timeout_ms)`: wait (at most `timeout_ms` and the blocking budget) for the named children
    (null: all of them) and answer their reports."""

    names: list[str] | None = None
    timeout_ms: NonNegative | None = None


class ChildName(Record):
    """`rlm.delete(name)`: the child to end (its run is cancelled if it still runs) and hand back."""

    name: str


class AnswerRequest(Record):
    """`rlm.answer(value)` from a child's cell: the child's answer (a JSON value), replacing its last expression's."""

    value: Any


class AnswerTaken(Record):
    """The host took a child's `rlm.answer`."""

    answered: bool


class ChildError(Record):
    """Why a child's run did not answer: the reason, a message, and the cell's traceback lines (if it raised)."""

    reason: ChildErrorReason
    message: str
    traceback: list[str] = msgspec.field(default_factory=list)


class RunRequest(Record):
    """The run of a child: `code` as one cell in the child's kernel, stalled past `timeout_ms` (null: never)."""

    code: str
    timeout_ms: NonNegative | None = None


class RunEnd(Record):
    """How a child's run ended: answered (with its answer), failed or stalled (with the error)."""

    status: Literal["answered", "failed", "stalled"]
    answer: Any = None
    error: ChildError | None = None


class ChildRow(Record):
    """One child on its parent's roster (`rlm.list_subagents`, `eukhe children list`)."""

    name: str
    session: str
    status: ChildStatus
    workspace: WorkspaceMode
    cwd: str  # the child's working directory: the parent's (shared), or its copy (isolated)
    timeout_ms: int | None
    handback: HandbackOutcome | None  # an isolated child's, once its hand-back ran (done or failed)


class ChildReport(Record):
    """A child's report (`rlm.collect`, `rlm.delete`): its status, answer or error, and its hand-back."""

    name: str
    session: str
    status: ChildStatus
    answer: Any
    error: ChildError | None
    handback: HandbackOutcome | None


class ChildState(Record):
    """The value of a child's `eukhe.child` state document in its parent's journal: its row and its report in one
    (`ended` is set once the child was stopped and, if isolated, handed back)."""

    name: str
    session: str
    status: ChildStatus
    workspace: WorkspaceMode
    cwd: str
    timeout_ms: int | None
    code: str
    copy: WorkspaceCopy | None = None
    answer: Any = None
    error: ChildError | None = None
    handback: HandbackOutcome | None = None
    ended: bool = False

    def row(self) -> ChildRow:
        return ChildRow(
            name=self.name,
            session=self.session,
            status=self.status,
            workspace=self.workspace,
            cwd=self.cwd,
            timeout_ms=self.timeout_ms,
            handback=self.handback,
        )

    def report(self) -> ChildReport:
        return ChildReport(
            name=self.name,
            session=self.session,
            status=self.status,
            answer=self.answer,
            error=self.error,
            handback=self.handback,
        )


class Roster(Record):
    """`rlm.list_subagents()` / `children.list`: the parent's children, in spawn order."""

    children: list[ChildRow]


class Reports(Record):
    """`rlm.collect()` / `children.collect`: the named children's reports (a child still running: `running`)."""

    reports: list[ChildReport]
