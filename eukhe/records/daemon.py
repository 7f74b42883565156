"""The daemon protocol's records (docs/daemon-protocol.md): each op's arguments and answer, the events, the replies.

`OPS` is the one table of operations: its arguments record, its answer record, who answers it (the supervisor or
the session's worker) and whether it streams events. Dispatch, strict decoding and `eukhe schema` all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from eukhe.core.clients import FRAME_LINES, MIN_ROOM_BYTES
from eukhe.records.base import Record
from eukhe.records.children import (
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
from eukhe.records.fs import (
    EditAnswer,
    EditArgs,
    GlobAnswer,
    GlobArgs,
    GrepAnswer,
    GrepArgs,
    ReadAnswer,
    ReadArgs,
    WriteAnswer,
    WriteArgs,
)
from eukhe.records.jobs import CallAnswer, JobList, JobRow, Rewound
from eukhe.records.journal import ForkOrigin
from eukhe.records.network import NetworkLog
from eukhe.records.output import OutputWindow
from eukhe.records.remote import RemoteCallAnswer, RemoteList
from eukhe.records.sandbox import SandboxChoice, SandboxPolicy
from eukhe.records.settings import KernelTransport, NonNegative, SessionSettings
from eukhe.records.tty import (
    Attached,
    Cols,
    InputTaken,
    JobAttachArgs,
    JobInputArgs,
    JobWriteAnswer,
    Rows,
    Signalled,
    SignalName,
    Tty,
    TtyOutput,
    WriteBudgetMs,
    WriteInput,
)

PROTOCOL_VERSION = 1

# ---------------------------------------------------------------------------------------------------------------------
# Envelopes


class RequestEnvelope(Record):
    """One request line: protocol version, an id the reply carries back, the op and its arguments."""

    v: int
    id: int | str
    op: str
    args: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))


class ErrorBody(Record):
    """Why a request was refused: a catalogue code, a message, and the input field at fault (if any)."""

    code: str
    message: str
    field: str | None = None
    details: dict[str, Any] | None = None


class OkReply(Record):
    """A request's answer."""

    v: int
    id: int | str | None
    ok: Literal[True]
    result: Any


class ErrorReply(Record):
    """A request's refusal."""

    v: int
    id: int | str | None
    ok: Literal[False]
    error: ErrorBody


class EventReply(Record):
    """One event of a request that streams (`watch`, or a call's `started`), before its answer."""

    v: int
    id: int | str
    event: Any


# ---------------------------------------------------------------------------------------------------------------------
# Arguments


class NoArgs(Record):
    """An op that takes no arguments."""


class SessionArgs(Record):
    """An op on one session."""

    session: str


class CreateArgs(Record):
    """`session.create`: the session's working directory, an absolute path that exists; `sandbox`: a mode or
    network over the settings files' policy; `policy`: the whole policy instead (a parent's child)."""

    cwd: str
    sandbox: SandboxChoice | None = None
    policy: SandboxPolicy | None = None


class SandboxCreation(Record):
    """What a new session's worker is told of its sandbox, in its environment (`CREATION_ENV`)."""

    sandbox: SandboxChoice | None = None
    policy: SandboxPolicy | None = None


CREATION_ENV = "EUKHE_SANDBOX_CREATION"


class CloseArgs(Record):
    """`session.close`: stop the session's worker (its kernel and jobs end; the session stays on disk). Refused
    while jobs run unless `force`, which kills them."""

    session: str
    force: bool = False


class DeleteArgs(Record):
    """`session.delete`: remove the session's directory, its artifacts and its workspaces (its worker is stopped
    first). Refused while jobs run unless `force`, which kills them."""

    session: str
    force: bool = False


class GcArgs(Record):
    """`gc`: apply the artifact retention policy now; `dry_run`: only say what it would remove."""

    dry_run: bool = False


class CullArgs(Record):
    """`session.cull` (the supervisor asks a worker; not a client's op): stop the kernel if it has been idle for
    `kernel_idle_ms` (0: never), and say whether the session has been idle for `session_idle_ms` (0: never) with
    nothing live in it (then the supervisor stops the worker)."""

    session: str
    session_idle_ms: NonNegative
    kernel_idle_ms: NonNegative


class ChildrenSpawnArgs(SpawnRequest, kw_only=True):
    """`children.spawn`: start a child of the session (the arguments of `rlm.spawn`); a prompt child's API key, as
    the asking client's environment has it (the daemon may have started before it was set; it is never stored)."""

    session: str
    api_key: str | None = None

    def __repr__(self) -> str:  # the key never goes in a log or a traceback
        return f"ChildrenSpawnArgs(session={self.session!r}, name={self.name!r})"


class ChildrenCollectArgs(CollectRequest, kw_only=True):
    """`children.collect`: wait for the session's named children (null: all); their reports."""

    session: str


class ChildrenDeleteArgs(ChildName, kw_only=True):
    """`children.delete`: end a child of the session, hand it back, take it off the roster."""

    session: str


class ChildRunArgs(RunRequest, kw_only=True):
    """`child.run`: the session runs `code` (one cell, then its answer) or `prompt` (a model's loop, its
    `message_parent` texts sent as `ParentMessage` events) as its run as a child."""

    session: str


class BashArgs(Record):
    """`bash`: run `command` with bash as a job; block at most `budget_ms` (within the session's budget); with
    `tty`, on a pseudo-terminal of `cols` x `rows`."""

    session: str
    command: str
    budget_ms: NonNegative | None = None
    tty: Tty = False
    cols: Cols = None
    rows: Rows = None


class IpythonArgs(Record):
    """`ipython`: run `code` as a cell on the session's kernel; block at most `budget_ms`."""

    session: str
    code: str
    budget_ms: NonNegative | None = None


class JobArgs(Record):
    """`jobs.cancel`: the job to kill through its owner."""

    session: str
    job: str


class JobWriteArgs(Record):
    """`jobs.write`: type `input` into a tty job's terminal; wait for its output at most `budget_ms`."""

    session: str
    job: str
    input: WriteInput
    budget_ms: WriteBudgetMs = None


class JobSignalArgs(Record):
    """`jobs.signal`: send `signal` to a job's process group."""

    session: str
    job: str
    signal: SignalName


class JobWaitArgs(Record):
    """`jobs.wait`: the job to wait for, at most `timeout_ms` (and the session's budget)."""

    session: str
    job: str
    timeout_ms: NonNegative | None = None


class RewindArgs(Record):
    """`tree.navigate` / `tree.fork`: the target entry (null: before every entry)."""

    session: str
    entry: str | None


class FsReadArgs(ReadArgs, kw_only=True):
    """`fs.read` on a session's working directory."""

    session: str


class FsWriteArgs(WriteArgs, kw_only=True):
    """`fs.write` on a session's working directory."""

    session: str


class FsEditArgs(EditArgs, kw_only=True):
    """`fs.edit` on a session's working directory."""

    session: str


class FsGrepArgs(GrepArgs, kw_only=True):
    """`fs.grep` on a session's working directory."""

    session: str


class FsGlobArgs(GlobArgs, kw_only=True):
    """`fs.glob` on a session's working directory."""

    session: str


class RemoteCallArgs(Record):
    """`remote.call`: call the kernel's `@rlm.remote` function `name` with keyword arguments `args`; block at most
    `budget_ms` (within the session's budget)."""

    session: str
    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    budget_ms: NonNegative | None = None


class CancelArgs(Record):
    """`cancel`: cancel the request in flight with this id on the same connection (its job is killed)."""

    request: int | str


# ---------------------------------------------------------------------------------------------------------------------
# Answers


class Pong(Record):
    """`ping`: the daemon (or a worker: with its session) answers."""

    pong: bool
    pid: int
    version: int
    session: str | None = None


class WorkerRow(Record):
    """One live session worker."""

    session: str
    pid: int
    cwd: str
    socket: str
    restarts: int


class ReopenedWorker(Record):
    """The worker that took over a dead one's session."""

    pid: int


class WorkerReport(Record):
    """A worker that died on its own: what it left was ended, and whether its session was reopened."""

    event: Literal["worker_died"]
    session: str
    pid: int
    exit: int
    orphans_ended: list[int]
    at: float
    reopened: ReopenedWorker | None = None
    reopen_error: str | None = None


class CullReport(Record):
    """What idle culling stopped: a session's worker (`session_culled`; the session reopens on its next request) or
    its kernel (`kernel_culled`; the next cell starts a fresh one), after `idle_s` seconds idle, at `at`."""

    event: Literal["session_culled", "kernel_culled"]
    session: str
    pid: int
    idle_s: float
    at: float


class RemovedArtifact(Record):
    """An artifact a collection removed (or would remove, on a dry run), and why: `age` or `size`."""

    path: str
    bytes: int
    reason: Literal["age", "size"]


class GcReport(Record):
    """`gc`: the artifacts found, what was removed (oldest first within each reason) and what was kept."""

    dry_run: bool
    at: float
    artifacts: int
    bytes_before: int
    bytes_freed: int
    bytes_after: int
    removed: list[RemovedArtifact]
    kept_pinned: int
    kept_being_written: int
    errors: list[str]
    max_total_bytes: int
    max_age_days: float


class DaemonStatus(Record):
    """`status` (and `eukhe daemon status --json`)."""

    running: bool
    pid: int
    socket: str
    version: int
    uptime_s: float
    workers: list[WorkerRow]
    reports: list[WorkerReport]
    fork_server: int | None = None
    """The warm fork server's pid (workers are forked from it); null when workers start as fresh Pythons."""
    culled: list[CullReport] = msgspec.field(default_factory=list)
    """What idle culling stopped, oldest first (the last 50)."""
    last_gc: GcReport | None = None
    """The last artifact collection (the daemon runs one at its start and every hour; `gc` runs one now)."""


class Stopping(Record):
    """`stop`: the daemon stops its workers (their jobs are killed) and exits."""

    stopping: bool
    pid: int


class SessionCreated(Record):
    """`session.create`: the new session, hosted by a new worker."""

    id: str
    cwd: str
    pid: int
    notices: list[str] = msgspec.field(default_factory=list)
    """What the settings files said at its start (a project key refused as looser than the user's policy...)."""


class SessionRow(Record):
    """One saved session."""

    id: str
    cwd: str
    forked_from: ForkOrigin | None
    open: bool


class SessionClosed(Record):
    """`session.close`: whether the session had a worker to stop (it is stopped now; the session stays)."""

    session: str
    was_open: bool


class SessionDeleted(Record):
    """`session.delete`: the session is gone; whether it had a worker to stop, and the directories removed."""

    session: str
    was_open: bool
    removed: list[str]


class CullAnswer(Record):
    """A worker's answer to `session.cull`: whether it stopped its kernel, whether the session is idle (nothing
    live and idle long enough: the supervisor stops the worker), for how long, and what keeps it busy."""

    session: str
    kernel_culled: bool
    kernel_idle_s: float | None
    idle: bool
    idle_s: float
    busy: list[str]


class Pins(Record):
    """`session.pins`: the artifacts the last answer of the session names (kept by every collection)."""

    session: str
    artifacts: list[str]


class SessionList(Record):
    """`session.list`: every saved session, in id order."""

    sessions: list[SessionRow]


class SessionPong(Record):
    """`session.ping`: the worker hosting the session."""

    session: str
    pid: int
    cwd: str
    watchers: int
    socket: str | None = None
    """The worker's own socket: a client that makes many calls of this session (`eukhe mcp`) sends them there,
    past the supervisor (docs/daemon-protocol.md, "Direct calls")."""


class EntryRow(Record):
    """One conversation entry."""

    id: str
    parent: str | None
    kind: str
    content: Any


class SessionShow(Record):
    """`session.show`: the entry tree, the leaf, the running jobs and the job nodes of the state tree."""

    id: str
    cwd: str
    settings: SessionSettings
    kernel_transport: KernelTransport | None
    sandbox: SandboxPolicy | None
    leaf: str | None
    entries: list[EntryRow]
    running_jobs: list[str]
    job_nodes: list[str]


class WatchEnded(Record):
    """`watch`: the stream ended (the client left)."""

    ended: bool


class CancelAccepted(Record):
    """`cancel`: the request is being cancelled; its own answer follows."""

    cancelling: bool
    request: int | str


# ---------------------------------------------------------------------------------------------------------------------
# Events


class Progress(Record):
    """What a running tool call reported so far: its output window, details, diagnostics and usage reports."""

    output: OutputWindow
    details: Any
    diagnostics: list[str]
    usage: list[dict[str, int]]


class CallProgressRow(Record):
    """A running call's last published progress (null: nothing published yet)."""

    call: str
    tool: str
    progress: Progress | None


class Snapshot(Record, tag="snapshot", tag_field="type"):
    """A watch's first event: the last published progress of each running call."""

    calls: list[CallProgressRow]


class ToolExecutionUpdate(Record, tag="tool_execution_update", tag_field="type"):
    """A call published its progress."""

    call: str
    tool: str
    progress: Progress


class ToolExecutionEnd(Record, tag="tool_execution_end", tag_field="type"):
    """A call's settle committed; nothing of it is sent after this."""

    call: str
    tool: str
    status: str


class JobUpdate(Record, tag="job_update", tag_field="type"):
    """A job's output counts or state changed."""

    job: JobRow


class CallBegan(Record, tag="call_started", tag_field="type"):
    """A tool call's start is journaled: the call id its progress on the session's board goes under."""

    call: str
    tool: str


class CallLive(Record):
    """A running tool call's progress (the board's `details` while it runs): how long it has run, the row of the
    job it runs (bytes and lines so far: kept + dropped, exact) with the last lines of its output, or how many of
    the children it awaits have ended."""

    elapsed_ms: int
    job: JobRow | None = None
    tail: str | None = None
    job_elapsed_ms: int | None = None
    """How long the job has run (a `jobs_wait` waits on a job that began before the call)."""
    children_awaited: int | None = None
    children_ended: int | None = None
    children_running: list[str] | None = None


class ResultRoom(Record):
    """At most `max_bytes` bytes (UTF-8) and `max_lines` lines of a tool result reach a client's model whole."""

    max_bytes: Annotated[int, msgspec.Meta(ge=MIN_ROOM_BYTES)]
    max_lines: Annotated[int, msgspec.Meta(ge=FRAME_LINES + 1)]


class ToolCallArgs(Record):
    """`tool.call`: one tool call (`tool` a tool's name, `args` its arguments record), journaled by the session."""

    session: str
    tool: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    events: bool = False
    """Send the call's `call_started` and its job's `started` as events (a client that follows its progress or
    names its job); a call nobody follows gets its answer alone."""
    api_key: str | None = None
    """The key a `spawn` of a prompt child uses, as the asking client's environment has it (never journaled)."""
    room: ResultRoom | None = None
    """How much text the asking client hands its model whole (`eukhe.core.clients`): the answer's output window and
    its text are cut to fit, with counts and notice over the whole output. None: the session's own window."""

    def __repr__(self) -> str:  # the key never goes in a log or a traceback
        return f"ToolCallArgs(session={self.session!r}, tool={self.tool!r})"


class ToolCallAnswer(Record):
    """A settled tool call: its id and status, the text the model reads, the tool's answer record, every warning
    and all usage, and the `tool_result` entry its settle committed."""

    call: str
    tool: str
    status: Literal["returned", "failed", "cancelled", "interrupted"]
    text: str
    answer: Any
    warnings: list[str]
    usage: dict[str, int]
    entry: str


class CallsArgs(Record):
    """`session.calls`: the session's tool calls, or one call's settle whole (`call`)."""

    session: str
    call: str | None = None


class CallRow(Record):
    """One tool call of a session: its tool, its arguments (bounded), its status (`running`, `done`, `cancelled`,
    `interrupted`; `outcome` says whether a done call returned or failed), its start and settle times (wall clock,
    ms since the epoch) and a one-line summary of its result."""

    call: str
    tool: str
    args: str
    status: Literal["running", "done", "cancelled", "interrupted"]
    outcome: Literal["returned", "failed", "cancelled", "interrupted"] | None
    started_ms: int | None
    settled_ms: int | None
    summary: str


class CallList(Record):
    """A session's tool calls, in start order (with one call's settle whole when `session.calls` named it)."""

    calls: list[CallRow]
    settle: dict[str, Any] | None = None


class CallStarted(Record, tag="started", tag_field="type"):
    """A `bash` or `ipython` call started its run: the job id a cancel or a later wait names."""

    job: str
    kind: str


WatchEvent = Snapshot | ToolExecutionUpdate | ToolExecutionEnd | JobUpdate
Event = WatchEvent | CallStarted | CallBegan


# ---------------------------------------------------------------------------------------------------------------------
# The table of operations


@dataclass(frozen=True, slots=True)
class Op:
    """One operation: its arguments, its answer, who answers it, whether it streams events, and what it does."""

    args: type[Record]
    answer: Any
    scope: Literal["supervisor", "session", "connection", "worker"]
    summary: str
    events: Any = None


OPS: dict[str, Op] = {
    "ping": Op(NoArgs, Pong, "supervisor", "is the daemon there"),
    "status": Op(NoArgs, DaemonStatus, "supervisor", "the daemon, its workers and their reports"),
    "stop": Op(NoArgs, Stopping, "supervisor", "stop the daemon: its workers close their sessions"),
    "session.create": Op(CreateArgs, SessionCreated, "supervisor", "create a session in a working directory"),
    "session.list": Op(NoArgs, SessionList, "supervisor", "every saved session"),
    "session.close": Op(CloseArgs, SessionClosed, "supervisor", "stop a session's worker; refused while jobs run"),
    "session.delete": Op(
        DeleteArgs,
        SessionDeleted,
        "supervisor",
        "remove a session, its artifacts and workspaces; refused while jobs run",
    ),
    "gc": Op(GcArgs, GcReport, "supervisor", "apply the artifact retention policy now (or only say what it would do)"),
    "session.cull": Op(
        CullArgs, CullAnswer, "worker", "the supervisor asks a worker: stop an idle kernel; is the session idle"
    ),
    "session.pins": Op(
        SessionArgs, Pins, "worker", "the supervisor asks a worker: the artifacts its last answer names"
    ),
    "session.ping": Op(SessionArgs, SessionPong, "session", "the worker hosting a session"),
    "session.show": Op(SessionArgs, SessionShow, "session", "a session's entries, leaf and jobs"),
    "bash": Op(BashArgs, CallAnswer, "session", "run a command as a job; detaches past the budget", CallStarted),
    "ipython": Op(IpythonArgs, CallAnswer, "session", "run a Python cell; detaches past the budget", CallStarted),
    "tool.call": Op(
        ToolCallArgs,
        ToolCallAnswer,
        "session",
        "one journaled tool call (a model's): start, settle",
        CallBegan | CallStarted,
    ),
    "session.calls": Op(CallsArgs, CallList, "session", "a session's tool calls, or one call's settle whole"),
    "session.network": Op(SessionArgs, NetworkLog, "session", "the connections the network allowlist's proxy saw"),
    "jobs.list": Op(SessionArgs, JobList, "session", "the session's jobs"),
    "jobs.wait": Op(JobWaitArgs, CallAnswer, "session", "wait for a job's end, at most the timeout and the budget"),
    "jobs.cancel": Op(JobArgs, CallAnswer, "session", "kill a job through its owner and wait for its end"),
    "watch": Op(SessionArgs, WatchEnded, "session", "stream the session's call and job progress", WatchEvent),
    "tree.navigate": Op(RewindArgs, Rewound, "session", "move the leaf; stop the jobs started after it"),
    "tree.fork": Op(RewindArgs, Rewound, "session", "fork at an entry; stop the jobs started after it"),
    "fs.read": Op(FsReadArgs, ReadAnswer, "session", "read a text file's lines, bounded"),
    "fs.write": Op(FsWriteArgs, WriteAnswer, "session", "create or replace a file, atomically"),
    "fs.edit": Op(FsEditArgs, EditAnswer, "session", "apply one multi-file patch, completely or not at all"),
    "fs.grep": Op(FsGrepArgs, GrepAnswer, "session", "lines matching a regex under a path, bounded"),
    "fs.glob": Op(FsGlobArgs, GlobAnswer, "session", "files matching a glob under a path, bounded"),
    "children.spawn": Op(
        ChildrenSpawnArgs, ChildRow, "session", "start a child: its code as a cell in its own session"
    ),
    "children.list": Op(SessionArgs, Roster, "session", "the session's children"),
    "children.collect": Op(ChildrenCollectArgs, Reports, "session", "wait for children's ends; their reports"),
    "children.delete": Op(ChildrenDeleteArgs, ChildReport, "session", "end a child, hand it back, forget it"),
    "child.run": Op(ChildRunArgs, RunEnd, "session", "run the session's code as a child's run (its parent asks)"),
    "remote.list": Op(SessionArgs, RemoteList, "session", "the kernel's @rlm.remote functions and their schemas"),
    "remote.call": Op(RemoteCallArgs, RemoteCallAnswer, "session", "call a kernel's @rlm.remote function"),
    "cancel": Op(CancelArgs, CancelAccepted, "connection", "cancel a request in flight on this connection"),
    "jobs.write": Op(JobWriteArgs, JobWriteAnswer, "session", "type into a tty job; its output since the last answer"),
    "jobs.signal": Op(JobSignalArgs, Signalled, "session", "send a signal to a job's process group"),
    "jobs.attach": Op(JobAttachArgs, Attached, "session", "stream a tty job's terminal (eukhe jobs attach)", TtyOutput),
    "jobs.input": Op(JobInputArgs, InputTaken, "session", "type into a tty job's terminal, waiting for no output"),
}
"""Every daemon operation."""

SESSION_OPS = frozenset(name for name, op in OPS.items() if op.scope == "session")
"""The requests the supervisor forwards to a session's worker (each names its `session`)."""
WORKER_OPS = frozenset(name for name, op in OPS.items() if op.scope == "worker")
"""The requests only the supervisor sends a worker (a client sending one is refused: `unknown_op`)."""

__all__ = ["OPS", "PROTOCOL_VERSION", "SESSION_OPS", "JobRow", "Op"]


class WorkerReady(Record):
    """The one line a worker writes on stdout at start: it serves `session` on `socket`, or why it could not."""

    ready: bool
    session: str | None = None
    pid: int | None = None
    socket: str | None = None
    error: str | None = None
    message: str | None = None
    notices: list[str] = msgspec.field(default_factory=list)
    """A new session's settings notices (`SessionCreated.notices`)."""


class ForkRequest(Record):
    """What the supervisor asks its fork server for (one SOCK_SEQPACKET message, with the worker's stdin read end
    and stdout write end attached): a worker in `cwd` with environment `env`, serving `socket`, for `session` (null:
    a new session). Paths and the environment go as bytes (any byte string the OS takes, no text decoding)."""

    socket: bytes
    daemon: bytes
    session: str | None
    cwd: bytes
    env: list[tuple[bytes, bytes]]


class Forked(Record):
    """The fork server's answer: the worker's pid (a child of the supervisor once this is sent), or why not."""

    pid: int | None = None
    error: str | None = None
