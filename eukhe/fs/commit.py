"""Carry out a patch's plan on disk, all of it or none of it: a patch applies completely or not at all.

The core (`eukhe.core.patch.plan`) has already decided every write and removal in memory. Here:

1. Prepare, changing nothing the user sees: each new content goes to a fixed-name temporary file beside its target
   (`.NAME.eukhe-edit`), flushed to disk, with the mode of the file it continues. Missing parent directories are
   made (with the umask). A failure removes the temporaries and those directories.
2. Commit, one rename per target: an existing target is first hard-linked to `.NAME.eukhe-orig` (renamed there
   where hard links are not supported), then the temporary is renamed over it; a new target is linked into place,
   so a file that appeared meanwhile is not replaced; a removed file is renamed to its `.eukhe-orig` name.
3. On a failure during the commit, every step done is undone in reverse (the originals renamed back, new files
   removed), then the temporaries and made directories are removed, and the error is raised.
4. After a whole commit, the `.eukhe-orig` names are removed and the directories flushed.

A crash (not an error) between the steps can leave the fixed-name files beside their targets; the next edit of the
same path replaces them. Names are fixed so that a crash leaves at most one of each per path.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eukhe.core.patch import Plan
from eukhe.fs.context import sibling
from eukhe.fs.writing import make_parents, remove_dirs, sync_dir, write_new_file

TEMP_TAG = "eukhe-edit"
ORIGINAL_TAG = "eukhe-orig"
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}

StepHook = Callable[[int, str], None]
"""Called before each commit step with its 0-based index and target path (a seam for tests that make a step fail
on a real disk)."""


class CommitError(Exception):
    """Preparing or committing the write or removal of `path` failed with `error`; everything done was undone,
    except the originals in `left` (pairs of target and where its original waits), which could not be put back."""

    def __init__(self, path: str, error: OSError, left: list[tuple[str, str]]) -> None:
        super().__init__(error.strerror or str(error))
        self.path = path
        self.error = error
        self.left = left


@dataclass(frozen=True, slots=True)
class _Done:
    target: str
    original: str | None  # where the replaced or removed file waits; None: the target is new


def _discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _set_aside(target: str, keep_target: bool) -> str:
    """Put the file at `target` at its `.eukhe-orig` name: as a second link (the target stays), else by rename."""
    original = sibling(target, ORIGINAL_TAG)
    _discard(original)  # a crash's leftover
    if keep_target:
        try:
            os.link(target, original)
            return original
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
    os.rename(target, original)
    return original


def _place_new(temp: str, target: str) -> None:
    """Put a new file at `target` only if nothing is there (a hard link fails on an existing name)."""
    try:
        os.link(temp, target)
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        os.rename(temp, target)
        return
    os.unlink(temp)


def _same_file(one: str, other: str) -> bool:
    try:
        return os.path.samestat(os.lstat(one), os.lstat(other))
    except OSError:
        return False


def _undo(done: list[_Done]) -> list[tuple[str, str]]:
    """Undo the steps in reverse; the originals that could not be put back (target, where the original waits)."""
    left: list[tuple[str, str]] = []
    for step in reversed(done):
        try:
            if step.original is None:
                os.unlink(step.target)
            elif _same_file(step.original, step.target):
                os.unlink(step.original)  # the target is still the original (rename of two links does nothing)
            else:
                os.rename(step.original, step.target)
        except OSError:
            if step.original is not None:
                left.append((step.target, step.original))
    return left


def commit(plan: Plan, modes: Mapping[str, int], before_step: StepHook | None = None) -> None:
    """Carry out `plan`; `modes` holds the st_mode of each original file a write's `mode_from` names.

    Raises `CommitError` after undoing everything: then no target has changed (unless `left` names originals that
    could not be put back).
    """
    temps: dict[str, str] = {}
    made: list[str] = []
    target = ""
    try:
        for write in plan.writes:
            target = write.path
            made += make_parents(os.path.dirname(write.path))
            temp = sibling(write.path, TEMP_TAG)
            _discard(temp)
            mode = None if write.mode_from is None else modes.get(write.mode_from)
            write_new_file(temp, write.content.encode("utf-8", errors="surrogateescape"), mode)
            temps[write.path] = temp
    except OSError as error:
        for temp in temps.values():
            _discard(temp)
        remove_dirs(made)
        raise CommitError(target, error, []) from error
    done: list[_Done] = []
    step = 0
    try:
        for write in plan.writes:
            target = write.path
            if before_step is not None:
                before_step(step, target)
            step += 1
            if os.path.lexists(target):
                done.append(_Done(target, _set_aside(target, keep_target=True)))
                os.rename(temps[target], target)
                temps.pop(target)
            else:
                _place_new(temps[target], target)
                temps.pop(target)
                done.append(_Done(target, None))
        for remove in plan.removes:
            target = remove.path
            if before_step is not None:
                before_step(step, target)
            step += 1
            done.append(_Done(target, _set_aside(target, keep_target=False)))
    except OSError as error:
        left = _undo(done)
        for temp in temps.values():
            _discard(temp)
        remove_dirs(made)
        raise CommitError(target, error, left) from error
    for finished in done:
        if finished.original is not None:
            with contextlib.suppress(OSError):
                os.unlink(finished.original)
    for directory in sorted({os.path.dirname(finished.target) for finished in done}):
        sync_dir(directory)
