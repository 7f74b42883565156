"""Which of the spawn's recorded files the hand-back's stat check decides, and how it shares them with a helper
process (spec S3 "A subagent's workspace" 4): pure, over the record's paths and what the shell found of their
directories.

A stat check compares a file's stat data with the record's, by its name in its directory's fd. It can decide a
regular file whose directory is still a directory and whose recorded mtime is older than the record (racy git);
every other recorded path (a symlink, a racy file, a file whose directory is gone or under a file now) is the
rest, which the shell looks at one by one. The checkable files go in groups of one directory's files (at most
`group_files` each), in the record's order. The tail of those groups (about `share` of the files) is offered to the
helper, which checks it from its last group back while this side, its own groups done, checks it from the first on:
each group is checked by whichever side reaches it first, and `helpers_part` keeps each group's answer once.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from eukhe.core.merge import all_stats_trusted, stat_trusted, unpacked_stat

StatGroup = tuple[str, list[tuple[str, bytes]]]
"""A directory of the copy (relative, "" for its root) and its recorded files there: (name, packed stat data)."""


class RecordedPath(Protocol):
    """A path of the spawn's record, as the plan reads it: its symlink target (None: a regular file) and its copy's
    packed stat data (`merge.STAT_PACKING`)."""

    @property
    def path(self) -> str: ...

    @property
    def link(self) -> str | None: ...

    @property
    def copy(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class StatCheckPlan:
    """The stat checks of one hand-back: this side's groups, the helper's, and the paths no stat check decides."""

    mine: list[StatGroup]
    theirs: list[StatGroup]
    rest: list[str]


GROUP_FILES = 128
"""The most files in one group: a directory of more is checked in several, so the two sides can meet inside it."""


def plan_stat_checks(
    recorded: Iterable[RecordedPath],
    live_dirs: Container[str],
    recorded_at_ns: int,
    share: float,
    group_files: int = GROUP_FILES,
) -> StatCheckPlan:
    """The plan for `recorded` (in the record's order: sorted, so a directory's files come together), given the
    directories that are still directories (`live_dirs`) and the moment the record began. `share` is the part of
    the checkable files offered to the helper (0: no helper)."""
    recorded = list(recorded)
    trusted = all_stats_trusted(b"".join(r.copy for r in recorded), recorded_at_ns)
    groups: list[StatGroup] = []
    rest: list[str] = []
    opened: str | None = None
    files: list[tuple[str, bytes]] = []
    for entry in recorded:
        path = entry.path
        directory, _, name = path.rpartition("/")
        if (
            entry.link is not None
            or directory not in live_dirs
            or not (trusted or stat_trusted(unpacked_stat(entry.copy).mtime_ns, recorded_at_ns))
        ):
            rest.append(path)
            continue
        if directory != opened or len(files) >= group_files:
            opened, files = directory, []
            groups.append((directory, files))
        files.append((name, entry.copy))
    mine, theirs = split_groups(groups, share)
    return StatCheckPlan(mine=mine, theirs=theirs, rest=rest)


def split_groups(groups: list[StatGroup], share: float) -> tuple[list[StatGroup], list[StatGroup]]:
    """The groups in two, whole: the head, and the longest tail holding at most `share` of the files."""
    total = sum(len(files) for _, files in groups)
    theirs = 0
    cut = len(groups)
    while cut > 0 and theirs + len(groups[cut - 1][1]) <= total * share:
        cut -= 1
        theirs += len(groups[cut][1])
    return groups[:cut], groups[cut:]


def helpers_part(checked_here: int, helper_found: Mapping[int, list[str]]) -> list[str]:
    """The helper's answers (a group's index in the offered tail: its unproven paths) that count, when this side
    checked the first `checked_here` groups of that tail: those of the groups it did not check, so that every group
    checked by both is taken once."""
    return [path for index in sorted(helper_found) if index >= checked_here for path in helper_found[index]]
