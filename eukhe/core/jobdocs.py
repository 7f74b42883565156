"""The job writer's decisions (S2 jobs 5): which `eukhe.job` document changes a batch of job records commits.

A job's start creates its document (type `eukhe.job`, key: the job id); its end retires it. The writer commits the
records it has in order, a batch per commit, and asks here what the batch writes:
  - a job that starts and ends in the same batch writes nothing;
  - an end whose node is absent (not committed before, not started in the batch) retires nothing;
  - a conversation entry in the batch (a `eukhe.bash` row, a notice) is written where it stands.
On open, every job node the history holds belongs to a job of an old process, which ended with it: the reopen
retires them all first and records their rows (`core.jobends`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

JOB_DOC_TYPE = "eukhe.job"


@dataclass(frozen=True, slots=True)
class JobStarted:
    """A job started; `document` is its node's value."""

    job: str
    document: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class JobEnded:
    """A job ended (exit or kill)."""

    job: str


@dataclass(frozen=True, slots=True)
class WriterEntry:
    """A conversation entry the writer appends in order with the job records (a row or a notice)."""

    kind: str
    content: Any


WriterRecord = JobStarted | JobEnded | WriterEntry


@dataclass(frozen=True, slots=True)
class PutNode:
    """Write: create the job's node."""

    job: str
    document: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RetireNode:
    """Write: retire the job's node."""

    job: str


@dataclass(frozen=True, slots=True)
class AppendEntry:
    """Write: append a conversation entry."""

    kind: str
    content: Any


Write = PutNode | RetireNode | AppendEntry


def plan_batch(present: frozenset[str], records: Sequence[WriterRecord]) -> tuple[Write, ...]:
    """The writes of one batch, in record order, given the job nodes committed before it (`present`)."""
    ends = {record.job for record in records if isinstance(record, JobEnded)}
    started: set[str] = set()
    writes: list[Write] = []
    for record in records:
        if isinstance(record, JobStarted):
            started.add(record.job)
            if record.job not in ends and record.job not in present:
                writes.append(PutNode(record.job, record.document))
        elif isinstance(record, JobEnded):
            if record.job in present and record.job not in started:
                writes.append(RetireNode(record.job))
        else:
            writes.append(AppendEntry(record.kind, record.content))
    return tuple(writes)


def nodes_after(present: frozenset[str], writes: Iterable[Write]) -> frozenset[str]:
    """The job nodes once `writes` commit."""
    nodes = set(present)
    for write in writes:
        if isinstance(write, PutNode):
            nodes.add(write.job)
        elif isinstance(write, RetireNode):
            nodes.discard(write.job)
    return frozenset(nodes)
