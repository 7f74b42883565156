"""The records of children (spec S3 "A subagent's workspace"): a spawn's arguments, a child's roster row
and report, the end of its run, and the state document a parent's journal keeps per child.

A child is a session of its own (its worker, kernel and jobs) whose run is a piece of code executed as one cell in
its kernel, or a prompt a model works on with the session's tools. Its `answer` is any JSON value: what the code
passed to `rlm.answer`, else its last expression's value; or what the model passed to its `answer` tool, else the
text of its last reply.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from eukhe.records.base import Record
from eukhe.records.settings import ModelProvider, NonNegative
from eukhe.records.workspace import HandbackOutcome, WorkspaceCopy

ChildStatus = Literal["running", "answered", "failed", "stalled", "cancelled", "interrupted"]
"""`running` until the run ends: `answered` (it finished), `failed` (it raised, or its kernel or host died, or its
model failed), `stalled` (past its `timeout_ms`, or its turns), `cancelled` (the parent deleted it while it ran),
`interrupted` (a prompt child whose loop was cut by its worker's or host's end; its transcript stays in its
session)."""
WorkspaceMode = Literal["shared", "isolated"]
ChildErrorReason = Literal[
    "exception",
    "interrupted",
    "kernel_died",
    "stalled",
    "cancelled",
    "host_stopped",
    "forked",
    "internal",
    "model_error",
]


class SpawnRequest(Record):
    """`rlm.spawn(name, code, workspace, timeout_ms)` or `rlm.spawn(name, prompt=..., model=...)`: start a child
    whose run is `code`, executed as a cell in the child's kernel, or `prompt`, worked on by a model (the `model`
    setting's, or the one named) with the child session's tools (exactly one of code and prompt); `isolated` gives it
    a copy of the parent's files, handed back path by path at its end."""

    name: str
    code: str | None = None
    workspace: WorkspaceMode = "shared"
    timeout_ms: NonNegative | None = None
    prompt: str | None = None
    model: str | None = None


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
    """Why a child's run did not answer: the reason, a message, the cell's traceback lines (if it raised), and the
    HTTP status of a model that failed (null: no HTTP answer)."""

    reason: ChildErrorReason
    message: str
    traceback: list[str] = msgspec.field(default_factory=list)
    http_status: int | None = None


class ChildUsage(Record):
    """What a prompt child used, summed over its model calls: tokens, model calls and tool calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0


class RunRequest(Record):
    """The run of a child: `code` as one cell in the child's kernel, or `prompt` worked on by the `provider`'s model
    (with `api_key`, in memory and on the private socket only), stalled past `timeout_ms` (null: never)."""

    code: str | None = None
    timeout_ms: NonNegative | None = None
    prompt: str | None = None
    provider: ModelProvider | None = None
    api_key: str | None = None

    def __repr__(self) -> str:  # the key never goes in a log or a traceback
        kind = "code" if self.code is not None else "prompt"
        return f"RunRequest({kind}, timeout_ms={self.timeout_ms})"


class ParentMessage(Record):
    """`message_parent(text)` of a prompt child (the spec's `agent_message`): an event of its run."""

    message: str


class RunEnd(Record):
    """How a child's run ended: answered (with its answer), failed, stalled or interrupted (with the error); a
    prompt child's usage."""

    status: Literal["answered", "failed", "stalled", "interrupted"]
    answer: Any = None
    error: ChildError | None = None
    usage: ChildUsage | None = None


class ChildRow(Record):
    """One child on its parent's roster (`rlm.list_subagents`, `eukhe children list`)."""

    name: str
    session: str
    status: ChildStatus
    workspace: WorkspaceMode
    cwd: str  # the child's working directory: the parent's (shared), or its copy (isolated)
    timeout_ms: int | None
    handback: HandbackOutcome | None  # an isolated child's, once its hand-back ran (done or failed)
    usage: ChildUsage | None = None  # a prompt child's, once its run ended
    messages: list[str] = msgspec.field(default_factory=list)  # a prompt child's `message_parent` texts so far


class ChildReport(Record):
    """A child's report (`rlm.collect`, `rlm.delete`): its status, answer or error, and its hand-back."""

    name: str
    session: str
    status: ChildStatus
    answer: Any
    error: ChildError | None
    handback: HandbackOutcome | None
    usage: ChildUsage | None = None
    messages: list[str] = msgspec.field(default_factory=list)


class ChildState(Record):
    """The value of a child's `eukhe.child` state document in its parent's journal: its row and its report in one
    (`ended` is set once the child was stopped and, if isolated, handed back)."""

    name: str
    session: str
    status: ChildStatus
    workspace: WorkspaceMode
    cwd: str
    timeout_ms: int | None
    code: str | None
    copy: WorkspaceCopy | None = None
    answer: Any = None
    error: ChildError | None = None
    handback: HandbackOutcome | None = None
    ended: bool = False
    prompt: str | None = None
    model: str | None = None
    usage: ChildUsage | None = None
    messages: list[str] = msgspec.field(default_factory=list)

    def row(self) -> ChildRow:
        return ChildRow(
            name=self.name,
            session=self.session,
            status=self.status,
            workspace=self.workspace,
            cwd=self.cwd,
            timeout_ms=self.timeout_ms,
            handback=self.handback,
            usage=self.usage,
            messages=list(self.messages),
        )

    def report(self) -> ChildReport:
        return ChildReport(
            name=self.name,
            session=self.session,
            status=self.status,
            answer=self.answer,
            error=self.error,
            handback=self.handback,
            usage=self.usage,
            messages=list(self.messages),
        )


class Roster(Record):
    """`rlm.list_subagents()` / `children.list`: the parent's children, in spawn order."""

    children: list[ChildRow]


class Reports(Record):
    """`rlm.collect()` / `children.collect`: the named children's reports (a child still running: `running`)."""

    reports: list[ChildReport]


class MessageParentTool(Record):
    """A prompt child's `message_parent(text)` tool: tell the parent something while the child works."""

    text: Annotated[str, msgspec.Meta(description="What to tell your parent now (it sees it while you work).")]


class AnswerTool(Record):
    """A prompt child's `answer(value)` tool: the child's answer; its run ends."""

    value: Annotated[Any, msgspec.Meta(description="Your answer, any JSON value (a string, a number, an object...).")]
