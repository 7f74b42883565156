"""The decisions about an MCP task of `eukhe mcp`: a long tool call that runs on in the background while its client
polls for it (docs/mcp.md, "Tasks").

A task is one eukhe call followed to its end: a `bash` or `ipython` run, a `jobs_wait`, or a `collect`. When the
call answers "still running" (it detached at its budget as a job, or a collect's children still run), the task goes
on waiting (`jobs_wait` on the job, `collect` again) until the job ends, and its result is the answer of that last
call. Rules, all in this file:

- Revisions (`Revision`): the Tasks utility of the 2025-11-25 specification (the client asks for a task with the
  request's `task` field; `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`) and the Tasks extension
  `io.modelcontextprotocol/tasks` of 2026-07-28 (the server decides; `tasks/get` carries the result; `tasks/update`,
  `tasks/cancel`).
- Statuses (`step`, the table TRANSITIONS): a task starts `working` and ends once, in `completed`, `failed` or
  `cancelled`; an ended task never changes again. `input_required` is never used: an eukhe call asks its client
  nothing. A call's answer ends the task by `end_status`: under the utility a tool result with `isError` is
  `failed`; under the extension it is `completed` (the extension keeps `failed` for JSON-RPC errors). A server fault
  (`Broke`) is `failed` under both. Once a cancel is asked, the cancel decides the end: an answer that arrives
  meanwhile is not the task's end.
- Following (`next_step`): after an answer, `Wait(job)` when a bash, cell or wait answered with a detached job,
  `Again` when a collect's children still run, else `Done`.
- Cancelling (`cancel_plan`, `cancel_verdict`): a task that knows the job it runs or waits on cancels that job (its
  whole process group ends; a cell is interrupted); one that does not yet (a cell before it detached, a collect)
  cancels its call in flight in the daemon. A second cancel while one is under way waits for the task's end.
  Cancelling an ended task is refused under the utility (`-32602`) and acknowledged under the extension (its
  cancel is advisory there).
- Time (`ttl_for`, `expired`, `reported_ttl`): a task is kept while it works and for its TTL after its end (TTL_MS
  by default; a utility client's requested TTL is held within MIN_TTL_MS and MAX_TTL_MS). Its reported TTL counts
  from its creation to that moment, so it grows while the task works. Clients poll every POLL_INTERVAL_MS.
- Room (`admit`): a server keeps at most MAX_TASKS tasks. A new one first drops the expired ones, then the oldest
  ended ones; when every task still works the new one is refused (`Full`): a utility request gets a JSON-RPC error,
  and under the extension the call answers as without tasks.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

POLL_INTERVAL_MS = 1000
"""How often a client is asked to poll a task (`pollInterval`): a job's progress changes every 200 ms at most."""
TTL_MS = 3_600_000
"""How long an ended task (its result) is kept, by default: an hour."""
MIN_TTL_MS = 60_000
MAX_TTL_MS = 86_400_000
"""The bounds of a TTL a client asks for: a minute to a day."""
MAX_TASKS = 256
"""The most tasks one server keeps (working and ended)."""

UTILITY_VERSION = "2025-11-25"
"""The revision whose Tasks utility eukhe serves: the first with tasks, and the last of the `initialize` era."""
EXTENSION_ID = "io.modelcontextprotocol/tasks"
"""The identifier of the Tasks extension of the 2026-07-28 revision."""

TASK_TOOLS = ("bash", "ipython", "jobs_wait", "collect")
"""The tools a task may run: the calls that can outlive their budget (a job that runs on, children still running)."""


class Revision(enum.Enum):
    """Which tasks a task is one of."""

    UTILITY = UTILITY_VERSION  # the 2025-11-25 utility: client-directed, tasks/result, tasks/list
    EXTENSION = EXTENSION_ID  # the 2026-07-28 extension: server-directed, tasks/get carries the result


class Status(enum.Enum):
    """A task's status (its wire value)."""

    WORKING = "working"  # the call runs, or the job it waits on does
    COMPLETED = "completed"  # the call answered (under the extension: also with a tool error)
    FAILED = "failed"  # the utility: the call answered a tool error; both: the server could not run it
    CANCELLED = "cancelled"  # a client's cancel ended it


ENDED = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
"""The terminal statuses."""


@dataclass(frozen=True, slots=True)
class Task:
    """What a task is now. Times are milliseconds on the server's clock."""

    id: str
    revision: Revision
    created_ms: int
    updated_ms: int
    ttl_ms: int
    status: Status = Status.WORKING
    message: str | None = None
    ended_ms: int | None = None
    cancel_asked: bool = False

    @property
    def ended(self) -> bool:
        return self.status in ENDED


# ---- events and the transition table -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progressed:
    """The call's progress changed: `message` says it (eukhe's progress text)."""

    message: str


@dataclass(frozen=True, slots=True)
class Answered:
    """The last call answered; nothing is left to follow. `is_error`: its result is a tool error."""

    is_error: bool
    message: str | None


@dataclass(frozen=True, slots=True)
class Broke:
    """The server could not run the call (a JSON-RPC error, not a tool error)."""

    message: str


@dataclass(frozen=True, slots=True)
class CancelAsked:
    """A client asked to cancel the task; its cancel is under way."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The cancel took effect: `message` says how the job (or the call) ended."""

    message: str


Event = Progressed | Answered | Broke | CancelAsked | Cancelled


def end_status(revision: Revision, *, is_error: bool) -> Status:
    """How a call's answer ends a task: a tool error is `failed` under the utility, `completed` under the extension."""
    if is_error and revision is Revision.UTILITY:
        return Status.FAILED
    return Status.COMPLETED


TRANSITIONS: dict[tuple[bool, type[Event]], str] = {
    (False, Progressed): "the message changes",
    (False, Answered): "ends as end_status says",
    (False, Broke): "ends failed",
    (False, CancelAsked): "the cancel is under way",
    (False, Cancelled): "ends cancelled",
    (True, Progressed): "the message stays that of the cancel",
    (True, Answered): "ignored: the cancel decides the end",
    (True, Broke): "ignored: the cancel decides the end",
    (True, CancelAsked): "no change",
    (True, Cancelled): "ends cancelled",
}
"""What an event does to a working task, by (a cancel was asked, the event's kind). An ended task takes none."""


def step(task: Task, event: Event, now_ms: int) -> Task:
    """The task after `event` at `now_ms` (TRANSITIONS); an ended task is returned unchanged."""
    if task.ended:
        return task
    if isinstance(event, Cancelled):
        return replace(task, status=Status.CANCELLED, message=event.message, updated_ms=now_ms, ended_ms=now_ms)
    if isinstance(event, CancelAsked):
        return task if task.cancel_asked else replace(task, cancel_asked=True, updated_ms=now_ms)
    if task.cancel_asked:
        return task
    if isinstance(event, Progressed):
        return task if event.message == task.message else replace(task, message=event.message, updated_ms=now_ms)
    if isinstance(event, Answered):
        status = end_status(task.revision, is_error=event.is_error)
        return replace(task, status=status, message=event.message, updated_ms=now_ms, ended_ms=now_ms)
    return replace(task, status=Status.FAILED, message=event.message, updated_ms=now_ms, ended_ms=now_ms)


# ---- following a call to its end -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait for `job` (a `jobs_wait` call), which the last call left running."""

    job: str


@dataclass(frozen=True, slots=True)
class Again:
    """Make the same call again: a collect whose children still run."""


@dataclass(frozen=True, slots=True)
class Done:
    """The last answer is the task's result."""


def next_step(tool: str, *, detached_job: str | None, children_running: bool) -> Wait | Again | Done:
    """What a task does after a call of `tool` answered: `detached_job` is the job a bash, cell or wait answered
    "still running" with; `children_running`, whether a collect's children still run."""
    if tool == "collect":
        return Again() if children_running else Done()
    return Wait(detached_job) if detached_job is not None else Done()


# ---- cancelling ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CancelJob:
    """Cancel the job (`jobs_cancel`): its whole process group ends, or its cell is interrupted."""

    job: str


@dataclass(frozen=True, slots=True)
class CancelCall:
    """Cancel the call in flight in the daemon (its `cancel`): a cell not yet a job is interrupted, a collect stops
    waiting and leaves the children running."""


def cancel_plan(job: str | None) -> CancelJob | CancelCall:
    """How to cancel a task that knows `job` (a job of the session's table it runs or waits on), or none yet."""
    return CancelJob(job) if job is not None else CancelCall()


@dataclass(frozen=True, slots=True)
class Refuse:
    """Refuse the cancel with `-32602` (Invalid params), saying why."""

    message: str


@dataclass(frozen=True, slots=True)
class Acknowledge:
    """Answer the cancel without doing anything: the task already ended."""


@dataclass(frozen=True, slots=True)
class Proceed:
    """Cancel the task."""


@dataclass(frozen=True, slots=True)
class Join:
    """A cancel is already under way: wait for the task's end (the cancel is not done twice)."""


def cancel_verdict(task: Task) -> Refuse | Acknowledge | Proceed | Join:
    """What a `tasks/cancel` of `task` gets."""
    if not task.ended:
        return Join() if task.cancel_asked else Proceed()
    if task.revision is Revision.UTILITY:
        return Refuse(f"Cannot cancel task: already in terminal status '{task.status.value}'")
    return Acknowledge()


# ---- time and room -------------------------------------------------------------------------------------------------


def ttl_for(requested: int | None) -> int:
    """The TTL of a new task: the one asked for, held within MIN_TTL_MS and MAX_TTL_MS, else TTL_MS."""
    if requested is None:
        return TTL_MS
    return min(max(requested, MIN_TTL_MS), MAX_TTL_MS)


def expired(task: Task, now_ms: int) -> bool:
    """Whether `task` may be dropped: it ended at least its TTL ago. A working task never expires."""
    return task.ended_ms is not None and now_ms - task.ended_ms >= task.ttl_ms


def reported_ttl(task: Task, now_ms: int) -> int:
    """The TTL a task shows (from its creation): to its end plus its TTL; while it works, to now plus its TTL."""
    until = (task.ended_ms if task.ended_ms is not None else now_ms) + task.ttl_ms
    return until - task.created_ms


@dataclass(frozen=True, slots=True)
class Admit:
    """Room for one more task, once the tasks `drop` are dropped (oldest first)."""

    drop: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Full:
    """No room: every task kept still works."""


def admit(tasks: Sequence[Task], now_ms: int, bound: int = MAX_TASKS) -> Admit | Full:
    """Whether a server holding `tasks` (in creation order) takes one more: the expired ones are dropped, then the
    oldest ended ones until one more fits within `bound`; when that is not enough, `Full`."""
    drop = [task.id for task in tasks if expired(task, now_ms)]
    kept = [task for task in tasks if not expired(task, now_ms)]
    excess = len(kept) + 1 - bound
    if excess > 0:
        ended = sorted((task for task in kept if task.ended), key=lambda task: (task.ended_ms or 0, task.created_ms))
        if len(ended) < excess:
            return Full()
        drop += [task.id for task in ended[:excess]]
    return Admit(tuple(drop))
