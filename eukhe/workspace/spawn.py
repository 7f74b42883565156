"""The copy at spawn (spec S3 "A subagent's workspace" 1-3, 7): the parent's files, twice, with a record.

`create_workspace` lists the parent's directory (`listing`), then copies each file into `base/` (the workspace as
the child finds it) and from there into `copy/` (the child's working directory), so base and copy hold the same
bytes even if the parent changes a file meanwhile. Extents are cloned where the filesystem can; elsewhere bytes are
copied and one warning with the counts is logged. Symlinks stay symlinks; files keep their modes and mtimes;
directories eukhe makes are 0700 at creation and then get the mode of the parent's directory they copy.

The record (`copy.json`) is written last, atomically; a workspace without it is an interrupted spawn that the next
`create_workspace` clears and starts again. It holds the stat data change detection compares at the hand-back.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

from eukhe.core.fsmode import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from eukhe.core.merge import StatFacts, ancestors
from eukhe.private_fs import make_private_dirs
from eukhe.records.workspace import CopiedDir, CopiedPath, CopyRecord, WorkspaceCopy
from eukhe.workspace.clone import Cloner
from eukhe.workspace.durable import remove_leftover, write_record
from eukhe.workspace.errors import CopyError, WorkspaceError, WorkspaceExistsError
from eukhe.workspace.layout import WorkspaceLayout
from eukhe.workspace.listing import MAX_WORKSPACE_FILES, list_workspace

log = logging.getLogger("eukhe.workspace")

CLOCK_PROBE = ".clock"

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


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


class _Copier:
    """Copies one path into base/ and copy/, cloning where it can; keeps the counts."""

    def __init__(self, source: Path, base: Path, copy: Path) -> None:
        self.source, self.base, self.copy = str(source), str(base), str(copy)
        self.into_base = Cloner()
        self.into_copy = Cloner()

    def path(self, relative: str) -> CopiedPath | None:
        """Copy one listed path; None if it is gone or is neither a regular file nor a symlink."""
        source = os.path.join(self.source, relative)
        try:
            fd = os.open(source, _READ)
        except OSError as error:
            if error.errno == errno.ELOOP:
                return self.symlink(relative, source)
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                return None  # listed, then removed (or a tracked file deleted in the work tree)
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None  # a directory (a submodule), a fifo, a socket, a device
            return self.regular(relative, fd, st)
        finally:
            os.close(fd)

    def regular(self, relative: str, source_fd: int, st: os.stat_result) -> CopiedPath:
        mode = stat.S_IMODE(st.st_mode)
        times = (st.st_atime_ns, st.st_mtime_ns)
        base_fd = os.open(os.path.join(self.base, relative), os.O_RDWR | _CREATE, PRIVATE_FILE_MODE)
        try:
            self.into_base.fill(source_fd, base_fd, st.st_size)
            os.fchmod(base_fd, mode)
            os.utime(base_fd, ns=times)
            copy_fd = os.open(os.path.join(self.copy, relative), os.O_WRONLY | _CREATE, PRIVATE_FILE_MODE)
            try:
                self.into_copy.fill(base_fd, copy_fd, st.st_size)
                os.fchmod(copy_fd, mode)
                os.utime(copy_fd, ns=times)
                copied = os.fstat(copy_fd)
            finally:
                os.close(copy_fd)
        finally:
            os.close(base_fd)
        return CopiedPath(path=relative, link=None, source=stat_facts(st), copy=stat_facts(copied))

    def symlink(self, relative: str, source: str) -> CopiedPath | None:
        try:
            st = os.lstat(source)
            target = os.readlink(source)
        except FileNotFoundError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            return None  # replaced since it was opened; the next spawn copies what is there
        times = (st.st_atime_ns, st.st_mtime_ns)
        for root in (self.base, self.copy):
            os.symlink(target, os.path.join(root, relative))
            os.utime(os.path.join(root, relative), ns=times, follow_symlinks=False)
        copied = os.lstat(os.path.join(self.copy, relative))
        return CopiedPath(path=relative, link=target, source=stat_facts(st), copy=stat_facts(copied))

    def counts(self) -> tuple[int, int, int]:
        """File copies cloned, file copies made of bytes, bytes copied (two copies per file: base and copy)."""
        return (
            self.into_base.cloned + self.into_copy.cloned,
            self.into_base.copied_files + self.into_copy.copied_files,
            self.into_base.copied_bytes + self.into_copy.copied_bytes,
        )


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
    copier = _Copier(parent, layout.base, layout.copy)
    directories = _directories(paths)
    copied: list[CopiedPath] = []
    current = ""
    try:
        for directory in directories:
            current = directory
            os.mkdir(layout.base / directory, PRIVATE_DIR_MODE)
            os.mkdir(layout.copy / directory, PRIVATE_DIR_MODE)
        for relative in paths:
            current = relative
            entry = copier.path(relative)
            if entry is not None:
                copied.append(entry)
        copied_dirs = []
        for directory in [*reversed(directories), ""]:  # once filled, the user's directories get their modes, mtimes
            current = directory
            mode, atime_ns, mtime_ns = _source_directory(parent / directory)
            if directory:  # the copy itself, and base, stay 0700 as eukhe made them
                os.chmod(layout.base / directory, mode)
                os.chmod(layout.copy / directory, mode)
            os.utime(layout.copy / directory, ns=(atime_ns, mtime_ns))
            copied_dirs.append(CopiedDir(path=directory, copy=stat_facts(os.lstat(layout.copy / directory))))
    except OSError as error:
        raise CopyError(current, error.strerror or str(error)) from error
    record = CopyRecord(
        parent_dir=str(parent), recorded_at_ns=recorded_at, paths=tuple(copied), dirs=tuple(reversed(copied_dirs))
    )
    write_record(layout.copy_record, msgspec.json.encode(record))
    cloned, copied_files, copied_bytes = copier.counts()
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


def _source_directory(directory: Path) -> tuple[int, int, int]:
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
    return msgspec.json.decode(layout.copy_record.read_bytes(), type=CopyRecord)
