"""The copy at spawn (spec S3 "A subagent's workspace" 1-3, 7): the parent's files, twice, with a record.

`create_workspace` lists the parent's directory (`listing`), then copies each file into `base/` (the workspace as
the child finds it) and from there into `copy/` (the child's working directory), so base and copy hold the same
bytes even if the parent changes a file meanwhile. Extents are cloned where the filesystem can; elsewhere bytes are
copied and one warning with the counts is logged. Symlinks stay symlinks; files keep their modes, and in the copy
their mtimes; directories eukhe makes are 0700 at creation and then get the mode of the parent's directory they copy.
A large listing is copied in alternate runs here and in a helper process (`copier`, `helper`).

The record (`copy.msgpack`) is written last, atomically; a workspace without it is an interrupted spawn that the next
`create_workspace` clears and starts again. It holds the stat data change detection compares at the hand-back.
"""

from __future__ import annotations

import logging
import marshal
import os
import stat
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

from eukhe.core.fsmode import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from eukhe.core.merge import STAT_PACKING, StatFacts, ancestors
from eukhe.private_fs import make_private_dirs
from eukhe.records.workspace import CopiedDir, CopiedPath, CopyRecord, WorkspaceCopy
from eukhe.workspace import copier
from eukhe.workspace.copier import Copier, Entry
from eukhe.workspace.durable import remove_leftover, write_record
from eukhe.workspace.errors import CopyError, WorkspaceError, WorkspaceExistsError
from eukhe.workspace.helper import HelperFailedError, HelperProcess, helper_pays, standalone_argv
from eukhe.workspace.layout import WorkspaceLayout
from eukhe.workspace.listing import MAX_WORKSPACE_FILES, list_workspace

log = logging.getLogger("eukhe.workspace")

CLOCK_PROBE = ".clock"

_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def current_umask() -> int:
    """This process's umask, read without changing it (Linux: /proc/self/status); 0o777 if unknown (every file
    is then made private and chmodded)."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o777


def stat_facts(st: os.stat_result) -> StatFacts:
    """The stat data change detection compares."""
    return StatFacts(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def filesystem_now(directory: Path) -> int:
    """The filesystem's clock now, as a file made in `directory` reads it (the clock file mtimes are stamped with)."""
    probe = directory / CLOCK_PROBE
    remove_leftover(probe)
    fd = os.open(probe, os.O_WRONLY | _CREATE, PRIVATE_FILE_MODE)
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        os.unlink(probe)


def _directories(paths: Iterable[str]) -> list[str]:
    """Every directory the paths need, parents before children."""
    return sorted({above for path in paths for above in ancestors(path)}, key=lambda d: d.split("/"))


def _outside(paths: list[str], parent: Path, root: Path) -> list[str]:
    """The paths not under the workspaces root, when that root lies inside the parent's directory (an agent dir in
    the project): a copy never holds other children's copies, nor its own."""
    try:
        inside = Path(os.path.realpath(root)).relative_to(os.path.realpath(parent)).as_posix()
    except ValueError:
        return paths
    if inside == ".":
        return []
    return [path for path in paths if path != inside and not path.startswith(inside + "/")]


RUN_PATHS = 256
"""Paths per run: alternate runs of the sorted listing share the bytes and the directories out evenly between this
process and its helper (`helper`), and a directory is still mostly one side's (its fds are opened once per run)."""

HELPER_ARGV = standalone_argv(copier.__file__)
"""The copy helper (`copier.main`): standard library only."""


def _copy_files(copier: Copier, paths: list[str]) -> tuple[list[CopiedPath], tuple[int, ...]]:
    """Copy every listed path: the entries in the listing's order and the counts (cloned, copied files, bytes).
    A failure is a CopyError naming its path (the first in the listing, when both sides fail)."""
    if not helper_pays(len(paths)):
        entries, failure = copier.run(paths)
        counts: tuple[int, ...] = copier.counts()
    else:
        runs = [paths[start : start + RUN_PATHS] for start in range(0, len(paths), RUN_PATHS)]
        argv = [*HELPER_ARGV, copier.source, copier.base, copier.copy, f"{copier.umask:o}"]
        with HelperProcess([*argv, f"{copier.private_mode:o}", copier.packing]) as helper:
            helper.send(marshal.dumps([path for run in runs[1::2] for path in run]))
            started = time.monotonic()
            entries, failure = copier.run([path for run in runs[::2] for path in run])
            patience_s = COPY_HELPER_PATIENCE_S + COPY_HELPER_SLOWDOWN * (time.monotonic() - started)
            theirs, their_failure, their_counts = _copied_by(helper, patience_s)
        entries = sorted(entries + theirs)  # the listing's order: it is sorted, and each path is there once
        failure = min((f for f in (failure, their_failure) if f is not None), default=None)
        counts = tuple(mine + their for mine, their in zip(copier.counts(), their_counts, strict=True))
    if failure is not None:
        raise CopyError(*failure)
    return [CopiedPath(path=p, link=link, source=source, copy=copy) for p, link, source, copy in entries], counts


COPY_HELPER_PATIENCE_S = 30.0
"""How long the spawn waits for its copy helper after its own share, beyond COPY_HELPER_SLOWDOWN times that share's
time (the helper's share is as large): only a hung helper reaches it (killed, and the spawn fails: a CopyError)."""
COPY_HELPER_SLOWDOWN = 10.0
"""How many times slower than this side the copy helper may copy its share before it counts as hung."""


def _copied_by(helper: HelperProcess, patience_s: float) -> tuple[list[Entry], tuple[str, str] | None, tuple[int, ...]]:
    """What the copy helper copied, once it ended (within `patience_s`); a helper that failed or hung is a
    CopyError with its last words."""
    try:
        entries, failure, counts = marshal.loads(helper.result(within_s=patience_s))
    except HelperFailedError as error:
        raise CopyError("", f"the copy helper failed (exit {error.code}): {error.said or 'no output'}") from None
    return entries, failure, counts


def clear_interrupted(layout: WorkspaceLayout) -> None:
    """Remove what a spawn cut short left (base and copy without a record)."""
    for leftover in (layout.base, layout.copy, layout.dir / CLOCK_PROBE):
        remove_leftover(leftover)


def create_workspace(
    parent_dir: Path, layout: WorkspaceLayout, *, max_files: int = MAX_WORKSPACE_FILES
) -> WorkspaceCopy:
    """Copy the parent's files into a new child workspace: base and copy, and the record of both.

    Raises WorkspaceTooLargeError (names workspace="shared") before touching the disk when the directory lists more
    than `max_files` files; WorkspaceExistsError when the child already has a workspace; CopyError on a failed copy.
    """
    parent = Path(os.path.abspath(parent_dir))
    if not parent.is_dir():
        raise WorkspaceError(f"the parent's directory is not a directory: {parent}")
    if layout.copy_record.exists() or layout.record.exists():
        raise WorkspaceExistsError(str(layout.dir))
    paths = _outside(list_workspace(parent, max_files), parent, layout.root)
    clear_interrupted(layout)
    make_private_dirs(layout.dir)
    os.mkdir(layout.base, PRIVATE_DIR_MODE)
    os.mkdir(layout.copy, PRIVATE_DIR_MODE)
    recorded_at = filesystem_now(layout.dir)
    umask = current_umask()
    copier = Copier(
        str(parent),
        str(layout.base),
        str(layout.copy),
        umask,
        private_mode=PRIVATE_FILE_MODE,
        packing=STAT_PACKING.format,
    )
    directories = _directories(paths)
    current = ""
    source, base, copy = str(parent), str(layout.base), str(layout.copy)  # strings: thousands of joins follow
    try:
        for directory in directories:
            current = directory
            os.mkdir(os.path.join(base, directory), PRIVATE_DIR_MODE)
            os.mkdir(os.path.join(copy, directory), PRIVATE_DIR_MODE)
        current = ""
        copied, (cloned, copied_files, copied_bytes) = _copy_files(copier, paths)
        copied_dirs = []
        for directory in [*reversed(directories), ""]:  # once filled, the user's directories get their modes, mtimes
            current = directory
            mode, atime_ns, mtime_ns = _source_directory(_under(source, directory))
            in_copy = _under(copy, directory)
            if directory:  # the copy itself, and base, stay 0700 as eukhe made them
                os.chmod(os.path.join(base, directory), mode)
                os.chmod(in_copy, mode)
            os.utime(in_copy, ns=(atime_ns, mtime_ns))
            copied_dirs.append(CopiedDir(path=directory, copy=stat_facts(os.lstat(in_copy))))
    except OSError as error:
        raise CopyError(current, error.strerror or str(error)) from error
    record = CopyRecord(
        parent_dir=str(parent), recorded_at_ns=recorded_at, paths=tuple(copied), dirs=tuple(reversed(copied_dirs))
    )
    write_record(layout.copy_record, msgspec.msgpack.encode(record))
    if copied_files:
        log.warning(
            "workspace copy of %s: the filesystem cannot clone extents; copied %d bytes in %d file copies"
            " (%d file copies cloned)",
            parent,
            copied_bytes,
            copied_files,
            cloned,
        )
    return WorkspaceCopy(
        parent_dir=str(parent),
        workspace_dir=str(layout.dir),
        base=str(layout.base),
        copy=str(layout.copy),
        files=len(copied),
        cloned=cloned,
        copied_files=copied_files,
        copied_bytes=copied_bytes,
    )


def _under(root: str, directory: str) -> str:
    """`directory` of the tree at `root` ("" is the root itself, with no trailing slash)."""
    return f"{root}/{directory}" if directory else root


def _source_directory(directory: str) -> tuple[int, int, int]:
    """(permission bits, atime_ns, mtime_ns) of a parent's directory; if it is no longer a directory, a private one
    stamped now (a directory whose mtime is not older than the record is always listed again at the hand-back)."""
    try:
        st = os.lstat(directory)
    except OSError:
        st = None
    if st is None or not stat.S_ISDIR(st.st_mode):
        now = time.time_ns()
        return PRIVATE_DIR_MODE, now, now
    return stat.S_IMODE(st.st_mode), st.st_atime_ns, st.st_mtime_ns


def load_copy_record(layout: WorkspaceLayout) -> CopyRecord:
    """The spawn's record of a workspace (FileNotFoundError if the spawn did not finish)."""
    return msgspec.msgpack.decode(layout.copy_record.read_bytes(), type=CopyRecord)
