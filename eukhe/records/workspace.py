"""Records that leave the workspace (spec S3 "A subagent's workspace" 5): the copy's record, the spawn's answer, the
hand-back's report and failure. Frozen msgspec structs with snake_case fields that refuse unknown fields."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from eukhe.core.merge import STAT_PACKING, StatFacts
from eukhe.records.base import Record

ConflictReason = Literal["both_changed", "parent_holds_directory", "parent_holds_file_above"]


PackedStat = Annotated[bytes, msgspec.Meta(min_length=STAT_PACKING.size, max_length=STAT_PACKING.size)]
"""A file's StatFacts (size, mtime_ns, ctime_ns, inode, mode) packed as `core.merge.STAT_PACKING` does."""


class CopiedPath(Record, array_like=True):
    """One file or symlink of the copy, as the spawn recorded it (a row of `copy.msgpack`, written as an array: a copy
    has up to 100,000 of them and the hand-back reads them all)."""

    path: str  # relative POSIX path
    link: str | None  # the symlink's target; None for a regular file
    source: PackedStat  # the parent's file as the spawn read it
    copy: PackedStat  # the child's working copy right after the spawn


class CopiedDir(Record, array_like=True):
    """One directory of the child's copy after the spawn ("" is the copy itself): while its stat data stay the same,
    no entry was added to it or removed, so the hand-back lists only the directories that changed."""

    path: str
    copy: StatFacts


class CopyRecord(Record):
    """The spawn's record of a copy (`copy.msgpack`), written last: a workspace without one is incomplete."""

    parent_dir: str
    recorded_at_ns: int  # the filesystem clock when the copy began: the racy-git threshold
    paths: tuple[CopiedPath, ...]
    dirs: tuple[CopiedDir, ...]


class WorkspaceCopy(Record):
    """The spawn's answer: where the copy is and how it was made."""

    parent_dir: str
    workspace_dir: str  # <root>/<parent session>/<child>
    base: str
    copy: str  # the child's working directory
    files: int  # files and symlinks copied
    cloned: int  # files whose extents were cloned (FICLONE) for both copies
    copied_files: int  # files whose bytes were copied instead
    copied_bytes: int  # bytes copied (both copies)


class HandbackConflict(Record):
    """One conflict: the parent's content stayed; the child's version is at `child_version`."""

    path: str
    reason: ConflictReason
    child_version: str | None  # its place in conflicts/; None when the child's version is a removal


class HandbackReport(Record, tag_field="status", tag="done"):
    """A finished hand-back (`handback.json`; the `handback` of a child's report and roster row)."""

    parent_dir: str
    paths_taken: tuple[str, ...]  # the child's changes now in the parent (removals included)
    paths_removed: tuple[str, ...]  # the taken paths that are removals
    conflicts: tuple[HandbackConflict, ...]
    conflicts_dir: str


class HandbackFailure(Record, tag_field="status", tag="failed"):
    """A hand-back that stopped: where, why, and the copy that stays."""

    path: str
    reason: str
    copy: str


HandbackOutcome = HandbackReport | HandbackFailure
"""What a child's report and roster row carry as `handback` (tag `status`: done or failed)."""
