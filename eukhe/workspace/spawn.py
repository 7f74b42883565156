"""The copy at spawn (spec S3 "A subagent's workspace" 1-3, 7): the parent's files, twice, with a record.

`create_workspace` lists the parent's directory (`listing`), then copies each file into `base/` (the workspace as
the child finds it) and from there into `copy/` (the child's working directory), so base and copy hold the same
bytes even if the parent changes a file meanwhile. Extents are cloned where the filesystem can; elsewhere bytes are
copied and one warning with the counts is logged. Symlinks stay symlinks; files keep their modes and mtimes;
directories eukhe makes are 0700 at creation and then get the mode of the parent's directory they copy.

The record (`copy.msgpack`) is written last, atomically; a workspace without it is an interrupted spawn that the next
`create_workspace` clears and starts again. It holds the stat data change detection compares at the hand-back.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import stat
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec

from eukhe.core.fsmode import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from eukhe.core.merge import STAT_PACKING, StatFacts, ancestors
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
_SOURCE_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_OWN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
"""Mode bits a file never gets at its creation here: set by fchmod after."""


def _open_dir(path: str, flags: int) -> int:
    """An fd of a directory, or -1 if it is gone or is not a directory now."""
    try:
        return os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return -1


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


def packed_facts(st: os.stat_result) -> bytes:
    """The stat data change detection compares, as the record holds them."""
    return STAT_PACKING.pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


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
    """Copies one path into base/ and copy/, cloning where it can; keeps the counts.

    Files are opened by name in their directory's fds (source, base, copy), kept while the paths stay in one
    directory (the listing is sorted): a whole path from the root is looked up once per directory, not per file."""

    def __init__(self, source: Path, base: Path, copy: Path, umask: int) -> None:
        self.source, self.base, self.copy = str(source), str(base), str(copy)
        self.umask = umask
        self.into_base = Cloner()
        self.into_copy = Cloner()
        self._directory: str | None = None
        self._fds: tuple[int, int, int] | None = None  # source, base, copy: the fds of `_directory`

    def close(self) -> None:
        """Close the directory fds it holds."""
        fds, self._fds, self._directory = self._fds, None, None
        for fd in fds or ():
            os.close(fd)

    def _dir_fds(self, directory: str) -> tuple[int, int, int] | None:
        """The fds of one directory in source, base and copy; None if the parent's directory is gone."""
        if directory != self._directory:
            self.close()
            self._directory = directory
            source_fd = _open_dir(os.path.join(self.source, directory), _SOURCE_DIR)
            if source_fd < 0:
                return None
            try:
                base_fd = os.open(os.path.join(self.base, directory), _OWN_DIR)
                try:
                    copy_fd = os.open(os.path.join(self.copy, directory), _OWN_DIR)
                except BaseException:
                    os.close(base_fd)
                    raise
            except BaseException:
                os.close(source_fd)
                raise
            self._fds = (source_fd, base_fd, copy_fd)
        return self._fds

    def path(self, relative: str) -> CopiedPath | None:
        """Copy one listed path; None if it is gone or is neither a regular file nor a symlink."""
        directory, _, name = relative.rpartition("/")
        fds = self._dir_fds(directory)
        if fds is None:
            return None  # listed, then removed with its directory (or it is a file now)
        try:
            fd = os.open(name, _READ, dir_fd=fds[0])
        except OSError as error:
            if error.errno == errno.ELOOP:
                return self.symlink(relative, os.path.join(self.source, relative))
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                return None  # listed, then removed (or a tracked file deleted in the work tree)
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None  # a directory (a submodule), a fifo, a socket, a device
            return self.regular(relative, name, fds, fd, st)
        finally:
            os.close(fd)

    def regular(
        self, relative: str, name: str, fds: tuple[int, int, int], source_fd: int, st: os.stat_result
    ) -> CopiedPath:
        mode = stat.S_IMODE(st.st_mode)
        # Made with its mode when the umask lets it through (the directories are 0700 until filled): no fchmod.
        made_with = mode if not mode & (self.umask | _SPECIAL_BITS) else PRIVATE_FILE_MODE
        times = (st.st_atime_ns, st.st_mtime_ns)
        base_fd = os.open(name, os.O_RDWR | _CREATE, made_with, dir_fd=fds[1])
        try:
            self.into_base.fill(source_fd, base_fd, st.st_size)
            if made_with != mode:
                os.fchmod(base_fd, mode)
            os.utime(base_fd, ns=times)
            copy_fd = os.open(name, os.O_WRONLY | _CREATE, made_with, dir_fd=fds[2])
            try:
                self.into_copy.fill(base_fd, copy_fd, st.st_size)
                if made_with != mode:
                    os.fchmod(copy_fd, mode)
                os.utime(copy_fd, ns=times)
                copied = os.fstat(copy_fd)
            finally:
                os.close(copy_fd)
        finally:
            os.close(base_fd)
        return CopiedPath(path=relative, link=None, source=packed_facts(st), copy=packed_facts(copied))

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
        return CopiedPath(path=relative, link=target, source=packed_facts(st), copy=packed_facts(copied))

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


COPY_THREADS = 2
"""Threads that copy files at once: a file's copies are system calls (open, clone, utime) that release the GIL, so
on two cores two threads make the base and the copy of a large workspace in about half the time."""
THREADED_FROM = 1000
"""Fewer files than this are copied on the calling thread (threads would cost more than they save)."""
RUN_PATHS = 256
"""Paths per run a thread takes at once: runs of the sorted listing, so a directory is mostly one thread's."""


def _copy_threads(files: int) -> int:
    return max(1, min(COPY_THREADS, os.cpu_count() or 1)) if files >= THREADED_FROM else 1


def _copy_run(copier: _Copier, run: list[str]) -> list[CopiedPath]:
    """Copy a run of paths in order; a failure is a CopyError naming its path."""
    copied: list[CopiedPath] = []
    for relative in run:
        try:
            entry = copier.path(relative)
        except OSError as error:
            raise CopyError(relative, error.strerror or str(error)) from error
        if entry is not None:
            copied.append(entry)
    return copied


def _copy_files(copiers: list[_Copier], paths: list[str]) -> list[CopiedPath]:
    """Copy every listed path with one copier per thread; the entries in the listing's order."""
    try:
        if len(copiers) == 1:
            return _copy_run(copiers[0], paths)
        runs = [paths[start : start + RUN_PATHS] for start in range(0, len(paths), RUN_PATHS)]
        free = queue.SimpleQueue[_Copier]()
        for copier in copiers:
            free.put(copier)

        def one(run: list[str]) -> list[CopiedPath]:
            copier = free.get()  # a copier (its directory fds, its counts) is one thread's at a time
            try:
                return _copy_run(copier, run)
            finally:
                free.put(copier)

        with ThreadPoolExecutor(len(copiers), thread_name_prefix="eukhe-copy") as pool:
            return [entry for done in pool.map(one, runs) for entry in done]
    finally:
        for copier in copiers:
            copier.close()


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
    copiers = [_Copier(parent, layout.base, layout.copy, umask) for _ in range(_copy_threads(len(paths)))]
    directories = _directories(paths)
    current = ""
    source, base, copy = str(parent), str(layout.base), str(layout.copy)  # strings: thousands of joins follow
    try:
        for directory in directories:
            current = directory
            os.mkdir(os.path.join(base, directory), PRIVATE_DIR_MODE)
            os.mkdir(os.path.join(copy, directory), PRIVATE_DIR_MODE)
        current = ""
        copied = _copy_files(copiers, paths)
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
    cloned, copied_files, copied_bytes = (sum(counts) for counts in zip(*(c.counts() for c in copiers), strict=True))
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
