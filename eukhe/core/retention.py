"""Artifact retention ("Bounded disk"): which artifacts a collection removes, decided from facts.

Rules, in order:

1. A kept artifact is never removed. Kept: named by the last answer of an open session, or still written (its writer
   holds it open): the shell says which.
2. Age: every artifact not kept whose age is over `max_age_ms` is removed (`AGE`).
3. Size: then, while all artifacts left (kept ones count) take more than `max_total_bytes`, the oldest artifact not
   kept is removed (`SIZE`), and no more than that: the first total at or under the limit stops it.

"Oldest" is by modification time, ties broken by path, so a plan is one exact answer. A limit of 0 is no limit.
`plan` is the one entry; the shell lists the artifacts, the clock gives `now_ms`, and the shell does the removals.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Reason(enum.Enum):
    """Why an artifact is removed."""

    AGE = "age"  # older than the age limit
    SIZE = "size"  # among the oldest while the total was over the size limit


@dataclass(frozen=True, slots=True)
class Artifact:
    """One artifact file as the shell found it."""

    path: str
    size: int
    mtime_ms: int
    kept: bool = False


@dataclass(frozen=True, slots=True)
class Policy:
    """The limits (0: none)."""

    max_total_bytes: int
    max_age_ms: int


@dataclass(frozen=True, slots=True)
class Removal:
    """An artifact the plan removes, and why."""

    artifact: Artifact
    reason: Reason


def _oldest_first(artifact: Artifact) -> tuple[int, str]:
    return (artifact.mtime_ms, artifact.path)


def plan(artifacts: Iterable[Artifact], policy: Policy, now_ms: int) -> tuple[Removal, ...]:
    """The removals, oldest first within each reason (age removals, then size removals)."""
    ordered = sorted(artifacts, key=_oldest_first)
    removals: list[Removal] = []
    left: list[Artifact] = []
    for artifact in ordered:
        if not artifact.kept and policy.max_age_ms > 0 and now_ms - artifact.mtime_ms > policy.max_age_ms:
            removals.append(Removal(artifact, Reason.AGE))
        else:
            left.append(artifact)
    if policy.max_total_bytes > 0:
        total = sum(artifact.size for artifact in left)
        for artifact in left:
            if total <= policy.max_total_bytes:
                break
            if artifact.kept:
                continue
            removals.append(Removal(artifact, Reason.SIZE))
            total -= artifact.size
    return tuple(removals)
