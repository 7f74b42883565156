"""The hand-back (spec S3 "A subagent's workspace" 4-6): read the facts, ask the core, carry out its plan.

The caller stops the child first (worker, kernel, jobs). Then `hand_back`:
1. If `handback.json` exists, the hand-back is over: it finishes the clean-up a crash may have cut, and returns the
   recorded report. It never plans, stops or changes the parent again.
2. Reads the three trees (`facts`) and asks `core.merge.plan`. It first removes the fixed-name copies
   (`.<name>.eukhe-handback`) a run cut by a crash may have left beside each merged path and in conflicts/.
3. Carries out the steps in the plan's order, each in one change: a removal is one unlink; a write is one rename of
   the child's version, copied beside the path under its fixed name; a conflict puts the child's version into
   `conflicts/<path>` the same way. The versions are all made first and fsynced at once (one journal commit, not one
   per file), then renamed one by one. Just before each change, the parent's entry is checked against what the
   facts read: if the parent changed it meanwhile, the hand-back stops (`HandbackError`) rather than overwrite it,
   and removes the versions it had not renamed yet.
4. Fsyncs each directory the steps changed, once (the journal keeps the changes in order, so one fsync after the
   last makes them all durable), then writes `handback.json` (the report) atomically: that ends the hand-back.
5. Renames base and copy aside (one rename each), puts a symlink to the parent's directory where the copy was,
   removes the copy record, then the retired trees (or leaves them to `remove_retired`).

A crash anywhere leaves every path old or new; the rerun plans from the start, and a path already taken reads as
changed by both to the same content, so it ends at the same tree and report. A failure raises `HandbackError` with
the path and reason; the copy stays.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

import msgspec

from eukhe.core import merge
from eukhe.core.fsmode import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from eukhe.core.merge import File, HandbackPlan, Leaf, Link, StatFacts, Step, ancestors
from eukhe.fsio import fsync_all, fsync_dir
from eukhe.private_fs import make_private_dirs
from eukhe.records.workspace import HandbackConflict, HandbackReport
from eukhe.workspace.copier import Cloner
from eukhe.workspace.durable import (
    CrashHook,
    no_hook,
    remove_leftover,
    remove_tree,
    replace_from_beside,
    write_record,
)
from eukhe.workspace.errors import HandbackError, WorkspaceError
from eukhe.workspace.facts import Facts, paused_gc, read_facts
from eukhe.workspace.layout import WorkspaceLayout, temp_beside
from eukhe.workspace.spawn import load_copy_record, stat_facts

log = logging.getLogger("eukhe.workspace")


def load_report(layout: WorkspaceLayout) -> HandbackReport | None:
    """The recorded report of a finished hand-back, or None if it has not finished."""
    try:
        data = layout.record.read_bytes()
    except FileNotFoundError:
        return None
    return msgspec.json.decode(data, type=HandbackReport)


def hand_back(layout: WorkspaceLayout, *, hook: CrashHook = no_hook, remove_now: bool = True) -> HandbackReport:
    """Take the child's changes into the parent's directory, path by path, crash-safe; the report.

    `hook` is called with a named point just before every rename or removal (tests kill the process there).
    `remove_now=False` leaves the retired base and copy for `remove_retired` (or the next call) to remove.
    Raises HandbackError (path, reason); the child's copy then stays and a rerun starts from the top.
    """
    done = load_report(layout)
    if done is not None:
        _finish_or_warn(layout, done.parent_dir, hook, remove_now=remove_now)
        return done
    try:
        with paused_gc():
            record = load_copy_record(layout)
    except FileNotFoundError:
        raise HandbackError(
            str(layout.copy_record), "the workspace has no copy record (its spawn did not finish)", str(layout.copy)
        ) from None
    run = _Run(layout, Path(record.parent_dir), hook)
    try:
        with paused_gc():
            facts = read_facts(layout, record)
            handback = merge.plan(facts.base, facts.parent, facts.child)
        run.prepare(facts, handback)
        run.carry_out(handback.steps)
        run.sync_changed_dirs()
        report = report_of(layout, record.parent_dir, handback)
        run.at = str(layout.record)
        write_record(layout.record, msgspec.json.encode(report), hook, "record")
    except HandbackError:
        raise
    except (OSError, WorkspaceError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise HandbackError(run.at, reason, str(layout.copy)) from error
    _finish_or_warn(layout, report.parent_dir, hook, remove_now=remove_now)
    return report


def _finish_or_warn(layout: WorkspaceLayout, parent_dir: str, hook: CrashHook, *, remove_now: bool) -> None:
    """The clean-up after the record. The hand-back is done once its record is: a clean-up that fails is logged,
    not raised, and the next call finishes it."""
    try:
        finish(layout, parent_dir, hook, remove_now=remove_now)
    except OSError as error:
        log.warning(
            "hand-back of %s is recorded, but its clean-up stopped: %s (the next call retries)", layout.dir, error
        )


def _conflict(layout: WorkspaceLayout, step: Step) -> HandbackConflict:
    """A reported step as the report lists it."""
    assert step.reason is not None  # the core gives every reported step its reason
    return HandbackConflict(
        path=step.path,
        reason=step.reason.value,  # the enum's values are exactly the Literal's
        child_version=None if step.child is None else str(layout.conflicts / step.path),
    )


def report_of(layout: WorkspaceLayout, parent_dir: str, handback: HandbackPlan) -> HandbackReport:
    """The report of a plan carried out: the same for a run and for its rerun after a crash."""
    return HandbackReport(
        parent_dir=parent_dir,
        paths_taken=handback.taken(),
        paths_removed=handback.removed(),
        conflicts=tuple(_conflict(layout, step) for step in handback.conflicts()),
        conflicts_dir=str(layout.conflicts),
    )


def _same(now: os.stat_result, seen: StatFacts | None) -> bool:
    """Whether the entry lstat finds now is the one the facts read."""
    return seen is not None and stat_facts(now) == seen


class _Run:
    """One hand-back run: carries out steps, one change each, and knows which path it is at."""

    def __init__(self, layout: WorkspaceLayout, parent: Path, hook: CrashHook) -> None:
        self.layout = layout
        self.parent = parent
        self.hook = hook
        self.cloner = Cloner()
        self.seen: dict[str, StatFacts | None] = {}
        self.at = str(parent)
        self.changed_dirs: dict[Path, None] = {}  # the directories a step changed, in order; fsynced before the record

    def prepare(self, facts: Facts, handback: HandbackPlan) -> None:
        """Remove what a cut run may have left beside each merged path, in the parent and in conflicts/.

        The child is stopped, so a rerun plans a step for every path the cut run did (only the verdict can differ,
        where the parent changed meanwhile); sweeping beside every step's path therefore finds every leftover, with
        no mark to write and make durable first.
        """
        self.seen = facts.parent_seen
        make_private_dirs(self.layout.conflicts)
        real_dirs: dict[str, bool] = {}
        for step in handback.steps:
            self.at = step.path
            places = [self.layout.conflicts / step.path]
            if all(self.is_real_dir(above, real_dirs) for above in ancestors(step.path)):
                places.append(self.parent / step.path)  # never look through a parent's symlink
            for place in places:
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    remove_leftover(temp_beside(place))

    def is_real_dir(self, path: str, seen: dict[str, bool]) -> bool:
        """Whether the parent's `path` is a directory itself, not a symlink to one (cached in `seen`)."""
        if path not in seen:
            try:
                seen[path] = stat.S_ISDIR(os.lstat(self.parent / path).st_mode)
            except OSError:
                seen[path] = False
        return seen[path]

    def carry_out(self, steps: tuple[Step, ...]) -> None:
        """The plan's steps in its order: each removal one unlink; then the child's version of each write and
        conflict is made beside its target, all of them are fsynced at once (one journal commit, not one each), and
        each replaces its target in one rename. A failure removes the versions not yet renamed."""
        staged: list[tuple[Step, Path, Path]] = []  # (step, target, the version beside it)
        try:
            for step in steps:
                self.at = step.path
                if step.removes:
                    self.remove(step.path)
                elif step.writes:
                    staged.append(self.stage_write(step))
                elif step.saves_conflict:
                    staged.append(self.stage_conflict(step))
            fsync_all([temp for step, _, temp in staged if isinstance(step.child, File)])
            while staged:
                step, target, temp = staged[0]
                self.at = step.path
                if step.writes:
                    self.check_unchanged(step.path, target)
                self.hook(f"{'take' if step.writes else 'conflict'}:{step.path}")
                os.rename(temp, target)
                staged.pop(0)
                self.changed_dirs[target.parent] = None
        finally:
            for _, _, temp in staged:
                with contextlib.suppress(OSError):
                    os.unlink(temp)

    def fail(self, path: str, reason: str) -> HandbackError:
        return HandbackError(path, reason, str(self.layout.copy))

    def remove(self, path: str) -> None:
        """The child removed a file the parent kept as it was: one unlink."""
        target = self.parent / path
        if not _same(os.lstat(target), self.seen.get(path)):
            raise self.fail(path, "the parent changed it during the hand-back")
        self.hook(f"remove:{path}")
        os.unlink(target)
        self.changed_dirs[target.parent] = None

    def check_unchanged(self, path: str, target: Path) -> None:
        """The parent's entry at `path` is still the one the facts read (or still absent), else the hand-back stops."""
        try:
            now: os.stat_result | None = os.lstat(target)
        except FileNotFoundError:
            now = None
        if (now is None) != (self.seen.get(path) is None) or (now is not None and not _same(now, self.seen[path])):
            raise self.fail(path, "the parent changed it during the hand-back")

    def stage_write(self, step: Step) -> tuple[Step, Path, Path]:
        """The child's version of a path it alone changed, made beside the parent's (which is checked first)."""
        target = self.parent / step.path
        self.make_parent_dirs(step.path)
        self.check_unchanged(step.path, target)
        return self.stage(step, target)

    def stage_conflict(self, step: Step) -> tuple[Step, Path, Path]:
        """The child's version of a conflicting path, made beside conflicts/<path>; the parent's stays."""
        target = self.layout.conflicts / step.path
        make_private_dirs(target.parent)
        return self.stage(step, target)

    def stage(self, step: Step, target: Path) -> tuple[Step, Path, Path]:
        """The child's version at the fixed name beside `target` (a leftover there is removed first)."""
        assert step.child is not None  # the plan writes or saves only a child's file or symlink
        temp = temp_beside(target)
        remove_leftover(temp)
        self.write_version(step.path, step.child, temp)
        return step, target, temp

    def make_parent_dirs(self, path: str) -> None:
        """The directories `path` needs in the parent, made with the child's modes; never through a file or symlink."""
        for above in ancestors(path):
            directory = self.parent / above
            try:
                mode = os.lstat(directory).st_mode
            except FileNotFoundError:
                os.mkdir(directory, PRIVATE_DIR_MODE)
                os.chmod(directory, stat.S_IMODE(os.lstat(self.layout.copy / above).st_mode))
                self.changed_dirs[directory.parent] = None
                continue
            if not stat.S_ISDIR(mode):
                raise self.fail(path, f"{above} in the parent is not a directory")

    def sync_changed_dirs(self) -> None:
        """Make every step's change durable: one fsync of each directory they changed, all at once, before the
        record."""
        self.at = str(self.parent)
        fsync_all(list(self.changed_dirs))
        self.changed_dirs.clear()

    def write_version(self, path: str, child: Leaf, temp: Path) -> None:
        """The child's file (bytes, mode, mtime; `carry_out` fsyncs it with the others) or symlink at `temp`."""
        if isinstance(child, Link):
            os.symlink(child.target, temp)
            return
        assert isinstance(child, File)
        source_fd = os.open(self.layout.copy / path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(source_fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            dest_fd = os.open(temp, flags, PRIVATE_FILE_MODE)
            try:
                self.cloner.fill(source_fd, dest_fd, st.st_size)
                os.fchmod(dest_fd, stat.S_IMODE(st.st_mode))
                os.utime(dest_fd, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(dest_fd)
        finally:
            os.close(source_fd)


def finish(layout: WorkspaceLayout, parent_dir: str, hook: CrashHook = no_hook, *, remove_now: bool = True) -> None:
    """After the record: base and copy go, and a symlink to the parent's directory takes the copy's place.

    Each step can be cut and run again: base and copy are renamed aside in one rename each, the symlink is put in
    place in one rename from beside it, and only then are the retired trees removed (now, or by `remove_retired`).
    """
    if layout.base.is_dir():
        hook("retire:base")
        remove_leftover(layout.retired_base)
        os.rename(layout.base, layout.retired_base)
    if not layout.copy.is_symlink():
        if layout.copy.exists():
            hook("retire:copy")
            remove_leftover(layout.retired_copy)
            os.rename(layout.copy, layout.retired_copy)
        replace_from_beside(
            layout.copy, lambda temp: os.symlink(parent_dir, temp), hook, "link:copy", fsync_parent=False
        )
    with contextlib.suppress(FileNotFoundError):
        os.unlink(layout.copy_record)
    # One fsync for all of it: the journal keeps these changes of one directory in order, and a crash before it
    # finds the record and finishes again.
    fsync_dir(layout.dir)
    if remove_now:
        remove_retired(layout)


def remove_retired(layout: WorkspaceLayout) -> None:
    """Remove the base and copy a finished hand-back set aside (two trees as large as the workspace: this is the
    slow part of a hand-back, so a caller may run it later, in the background)."""
    remove_tree(layout.retired_base)
    remove_tree(layout.retired_copy)


def handback_done(layout: WorkspaceLayout) -> bool:
    """Whether the child's hand-back has its record (a repeat returns that record and changes nothing)."""
    return layout.record.exists()
