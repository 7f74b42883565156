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
from eukhe.fs.opening import Parents
from eukhe.fs.writing import write_new_file

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
        said = error.strerror or str(error)
        if error.errno == errno.ELOOP:
            said = "the path changed while it was opened (a directory of it became a symlink)"
        super().__init__(said)
        self.path = path
        self.error = error
        self.left = left


@dataclass(frozen=True, slots=True)
class _Done:
    target: str
    original: str | None  # where the replaced or removed file waits; None: the target is new


def _name(path: str) -> str:
    return os.path.basename(path)


def _discard(directory: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=directory)


def _exists(directory: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _set_aside(directory: int, target: str, keep_target: bool) -> str:
    """Put the file at `target` at its `.eukhe-orig` name: as a second link (the target stays), else by rename."""
    original = sibling(target, ORIGINAL_TAG)
    _discard(directory, _name(original))  # a crash's leftover
    if keep_target:
        try:
            os.link(_name(target), _name(original), src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
            return original
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
    os.rename(_name(target), _name(original), src_dir_fd=directory, dst_dir_fd=directory)
    return original


def _place_new(directory: int, temp: str, target: str) -> None:
    """Put a new file at `target` only if nothing is there (a hard link fails on an existing name)."""
    try:
        os.link(_name(temp), _name(target), src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        os.rename(_name(temp), _name(target), src_dir_fd=directory, dst_dir_fd=directory)
        return
    os.unlink(_name(temp), dir_fd=directory)


def _same_file(directory: int, one: str, other: str) -> bool:
    try:
        return os.path.samestat(
            os.stat(_name(one), dir_fd=directory, follow_symlinks=False),
            os.stat(_name(other), dir_fd=directory, follow_symlinks=False),
        )
    except OSError:
        return False


def _undo(parents: Parents, done: list[_Done]) -> list[tuple[str, str]]:
    """Undo the steps in reverse; the originals that could not be put back (target, where the original waits)."""
    left: list[tuple[str, str]] = []
    for step in reversed(done):
        try:
            directory = parents.fd(os.path.dirname(step.target), make=False)
            if step.original is None:
                os.unlink(_name(step.target), dir_fd=directory)
            elif _same_file(directory, step.original, step.target):
                os.unlink(_name(step.original), dir_fd=directory)  # the target is still the original
            else:
                os.rename(_name(step.original), _name(step.target), src_dir_fd=directory, dst_dir_fd=directory)
        except OSError:
            if step.original is not None:
                left.append((step.target, step.original))
    return left


def commit(plan: Plan, modes: Mapping[str, int], before_step: StepHook | None = None) -> None:
    """Carry out `plan`; `modes` holds the st_mode of each original file a write's `mode_from` names. Each target is
    reached through its directory's descriptor, opened following no symlink (`eukhe.fs.opening`).

    Raises `CommitError` after undoing everything: then no target has changed (unless `left` names originals that
    could not be put back).
    """
    with Parents("", "edit") as parents:
        _commit(parents, plan, modes, before_step)


def _commit(parents: Parents, plan: Plan, modes: Mapping[str, int], before_step: StepHook | None) -> None:
    temps: dict[str, str] = {}
    target = ""

    def discard_temps() -> None:
        for written, temp in temps.items():
            with contextlib.suppress(OSError):
                _discard(parents.fd(os.path.dirname(written), make=False), _name(temp))

    try:
        for write in plan.writes:
            target = write.path
            directory = parents.fd(os.path.dirname(write.path), make=True)
            temp = sibling(write.path, TEMP_TAG)
            _discard(directory, _name(temp))
            mode = None if write.mode_from is None else modes.get(write.mode_from)
            write_new_file(_name(temp), write.content.encode("utf-8", errors="surrogateescape"), mode, directory)
            temps[write.path] = temp
        for remove in plan.removes:
            target = remove.path
            parents.fd(os.path.dirname(remove.path), make=False)
    except OSError as error:
        discard_temps()
        parents.remove_made()
        raise CommitError(target, error, []) from error
    done: list[_Done] = []
    step = 0
    try:
        for write in plan.writes:
            target = write.path
            if before_step is not None:
                before_step(step, target)
            step += 1
            directory = parents.fd(os.path.dirname(target), make=False)
            if _exists(directory, _name(target)):
                done.append(_Done(target, _set_aside(directory, target, keep_target=True)))
                os.rename(_name(temps[target]), _name(target), src_dir_fd=directory, dst_dir_fd=directory)
                temps.pop(target)
            else:
                _place_new(directory, temps[target], target)
                temps.pop(target)
                done.append(_Done(target, None))
        for remove in plan.removes:
            target = remove.path
            if before_step is not None:
                before_step(step, target)
            step += 1
            directory = parents.fd(os.path.dirname(target), make=False)
            done.append(_Done(target, _set_aside(directory, target, keep_target=False)))
    except OSError as error:
        left = _undo(parents, done)
        discard_temps()
        parents.remove_made()
        raise CommitError(target, error, left) from error
    for finished in done:
        if finished.original is not None:
            with contextlib.suppress(OSError):
                _discard(parents.fd(os.path.dirname(finished.target), make=False), _name(finished.original))
    for path in sorted({os.path.dirname(finished.target) for finished in done}):
        parents.sync(path)
