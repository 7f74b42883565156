"""Artifacts on disk and their collection ("Bounded disk"): the shell around `eukhe.core.retention`.

Artifacts are the files in each session's `artifacts/` dir (`<sessions root>/<id>/artifacts/*`). `collect` lists
them (size, modification time), marks the kept ones (the paths it is given: named by the last answer of an open
session; and every artifact still being written, which its writer holds flock'ed: `BoundedOutput`), asks the core's
`plan`, and removes what it says, each under an exclusive flock taken without waiting (an artifact whose writer
holds it now is left). A dry run only plans.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from eukhe.core import retention
from eukhe.records.daemon import GcReport, RemovedArtifact
from eukhe.records.settings import Upkeep
from eukhe.store import dirs

DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class Found:
    """One artifact file as listed."""

    path: str
    size: int
    mtime_ms: int


def artifact_files(root: Path) -> list[Found]:
    """Every regular file in every session's artifacts dir under the sessions root (symlinks are not followed)."""
    found: list[Found] = []
    if not root.is_dir():
        return found
    for session in sorted(os.listdir(root)):
        directory = root / session / dirs.ARTIFACTS_NAME
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in sorted(names):
            path = directory / name
            try:
                facts = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(facts.st_mode):
                found.append(Found(str(path), facts.st_size, facts.st_mtime_ns // 1_000_000))
    return found


def being_written(path: str) -> bool:
    """Whether a writer holds the artifact (its shared flock): an exclusive one cannot be taken at once."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def remove_unless_written(path: str) -> bool:
    """Remove the artifact under an exclusive flock taken without waiting; False if a writer holds it now."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.unlink(path)
        return True
    finally:
        os.close(fd)


def policy_of(upkeep: Upkeep) -> retention.Policy:
    """The core's policy from the settings (0: no limit)."""
    return retention.Policy(
        max_total_bytes=upkeep.artifact_max_total_bytes,
        max_age_ms=round(upkeep.artifact_max_age_days * DAY_MS),
    )


def collect(root: Path, pinned: Collection[str], upkeep: Upkeep, now_ms: int, *, dry_run: bool) -> GcReport:
    """Apply the retention policy to the artifacts under `root` (keeping `pinned` and those being written); what
    it removed (or would remove, on a dry run)."""
    files = artifact_files(root)
    pins = {os.path.normpath(path) for path in pinned}
    writing = {found.path for found in files if being_written(found.path)}
    artifacts = [
        retention.Artifact(f.path, f.size, f.mtime_ms, kept=f.path in pins or f.path in writing) for f in files
    ]
    removed: list[RemovedArtifact] = []
    errors: list[str] = []
    for removal in retention.plan(artifacts, policy_of(upkeep), now_ms):
        artifact = removal.artifact
        if not dry_run:
            try:
                if not remove_unless_written(artifact.path):
                    continue
            except FileNotFoundError:
                continue
            except OSError as error:
                errors.append(f"{artifact.path}: {error.strerror or error}")
                continue
        removed.append(RemovedArtifact(path=artifact.path, bytes=artifact.size, reason=removal.reason.value))
    before = sum(f.size for f in files)
    freed = sum(r.bytes for r in removed)
    return GcReport(
        dry_run=dry_run,
        at=now_ms / 1000,
        artifacts=len(files),
        bytes_before=before,
        bytes_freed=freed,
        bytes_after=before - freed,
        removed=removed,
        kept_pinned=sum(1 for f in files if f.path in pins),
        kept_being_written=len(writing),
        errors=errors,
        max_total_bytes=upkeep.artifact_max_total_bytes,
        max_age_days=upkeep.artifact_max_age_days,
    )
