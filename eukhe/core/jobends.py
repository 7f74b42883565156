"""Job records that outlive their process (S2 "Jobs" 5): why a job ended with its host, what the reopen
records for it, and what `jobs.list` says for the jobs of earlier lives.

A session's journal outlives the process that hosts it (a daemon worker, a Python program); its jobs do not. When
the host ends, its jobs end with it, and the next open records each job the history left running (its `eukhe.job`
node) as ended: killed, no exit code, and a reason read from durable facts only:

    the node says a stop began (the host recorded `stop_reason` on it before its kills)  -> that stop's reason
    else the node's boot id and this boot's are both known and differ                    -> host_restart
    else                                                                                  -> worker_died

A recorded stop is the first cause: a host that began a clean stop (a daemon stop, a session close) killed its jobs
itself, whatever ended the process afterwards. Without one, a changed boot id says the machine restarted; anything
else is a host that died without a word (kill -9, a crash, an out-of-memory kill).

The jobs of earlier lives are folded from the journal's facts in commit order (`past_jobs`): a job's node put, its
node retired, its end row recorded. A job is listed once, where it first appears; its end is its first end row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

EndReason = Literal["worker_died", "daemon_stopped", "host_restart", "session_closed", "forked"]
"""Why a job ended with its host: its worker died, the daemon stopped, the machine restarted, the session was closed
(each killed it); or `forked`: the session forked and the job went on in the fork, which records its end."""
StopReason = Literal["daemon_stopped", "session_closed"]
"""A clean stop a host records on its running jobs' nodes before it kills them."""

END_REASONS: tuple[EndReason, ...] = ("worker_died", "daemon_stopped", "host_restart", "session_closed")
STOP_REASONS: tuple[StopReason, ...] = ("daemon_stopped", "session_closed")

E = TypeVar("E")


def end_reason(stop: StopReason | None, started_boot: str | None, boot: str | None) -> EndReason:
    """Why a job whose node the history left ended: the stop its host recorded, else a restart of the machine (its
    boot id differs from this one), else its host died."""
    if stop is not None:
        return stop
    if started_boot is not None and boot is not None and started_boot != boot:
        return "host_restart"
    return "worker_died"


@dataclass(frozen=True, slots=True)
class GroupMark:
    """A job's process group as its node records it: the group id (its leader's pid), when the leader started (clock
    ticks since boot), and the mark its processes carry in their environment: with these (and the boot it ran in)
    a reopen tells the job's group from a later one that took the number."""

    group: int
    leader_start: int
    mark: str


@dataclass(frozen=True, slots=True)
class LeftNode:
    """A job node the history left: its job, the stop its host recorded on it (if any), the boot it started in, and
    the process group it names (a bash job's; None for a cell's, or a node of an older build)."""

    job: str
    stop: StopReason | None
    boot: str | None
    group: GroupMark | None = None


@dataclass(frozen=True, slots=True)
class ReopenedEnd:
    """What a reopen records for a job that ended with its host: ended, killed, no exit code, and why."""

    job: str
    reason: EndReason
    killed: Literal[True] = True
    exit_code: None = None


def group_is_the_jobs(
    mark: GroupMark, started_boot: str | None, boot: str | None, leader_start: int | None, marked_members: int
) -> bool:
    """Whether the live process group `mark.group` is still the job's, so a reopen that records the job ended ends
    it too. Facts: its leader's start now (None when the leader is gone) and how many of its members carry the mark.

    Only in the same boot. With its leader alive: exactly when the leader is the same process (same start). With the
    leader gone, start times cannot tell the job's group from a later one that took the number (every member of
    either started after the job's leader): then only a member that carries the job's mark says so."""
    if started_boot is None or started_boot != boot:  # an unknown boot (either one) is never the same
        return False
    if leader_start is not None:
        return leader_start == mark.leader_start
    return marked_members > 0


def reopened_ends(nodes: Iterable[LeftNode], boot: str | None) -> tuple[ReopenedEnd, ...]:
    """On open, this boot being `boot`: the end of every job whose node the history left, in the nodes' order."""
    return tuple(ReopenedEnd(node.job, end_reason(node.stop, node.boot, boot)) for node in nodes)


# ---- the jobs of earlier lives -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodePut:
    """The journal put a job's node (its start, or a stop recorded on it)."""

    job: str
    kind: str
    command: str
    started_ms: int


@dataclass(frozen=True, slots=True)
class NodeRetired:
    """The journal retired a job's node (its end, or a reopen's)."""

    job: str


@dataclass(frozen=True, slots=True)
class EndRecorded(Generic[E]):
    """The journal holds a job's end row (`end`: the row itself, which this module does not read)."""

    job: str
    kind: str
    command: str
    started_ms: int | None
    end: E


HistoryFact = NodePut | NodeRetired | EndRecorded[E]


@dataclass(frozen=True, slots=True)
class PastJob(Generic[E]):
    """A job of the journal's history: what it ran, when, whether it ended, and its end row (None: the journal holds
    none; a job whose node was retired without a row ended, how is not recorded)."""

    job: str
    kind: str
    command: str
    started_ms: int
    ended: bool
    end: E | None


@dataclass(slots=True)
class _Fold(Generic[E]):
    kind: str
    command: str
    started_ms: int | None
    node: bool  # whether a node was put
    retired: bool
    end: EndRecorded[E] | None


def past_jobs(facts: Iterable[HistoryFact[E]]) -> tuple[PastJob[E], ...]:
    """Every job whose node or end row the facts hold, once, in the order each first appears.

    What it ran and when it started: its first node's, else its end row's (0 when neither says). It ended when an
    end row was recorded or its node retired; its end is its first end row (a job ends once: a later row, e.g. one a
    fork copied, changes nothing)."""
    jobs: dict[str, _Fold[E]] = {}
    for fact in facts:
        found = jobs.get(fact.job)
        if isinstance(fact, NodePut):
            if found is None:
                jobs[fact.job] = _Fold(fact.kind, fact.command, fact.started_ms, True, False, None)
            elif not found.node:
                found.node = True
                found.kind, found.command, found.started_ms = fact.kind, fact.command, fact.started_ms
        elif isinstance(fact, NodeRetired):
            if found is not None:  # a retire names no job by itself: one without a node or row is no job
                found.retired = True
        elif found is None:
            jobs[fact.job] = _Fold(fact.kind, fact.command, fact.started_ms, False, False, fact)
        elif found.end is None:  # only a job that has a node can be found without an end: its node says the rest
            found.end = fact
    return tuple(
        PastJob(
            job,
            fold.kind,
            fold.command,
            fold.started_ms if fold.started_ms is not None else 0,
            fold.retired or fold.end is not None,
            None if fold.end is None else fold.end.end,
        )
        for job, fold in jobs.items()
    )
