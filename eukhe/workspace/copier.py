"""Copies of the parent's files at spawn, cloning extents where the filesystem can (spec S3 "A subagent's
workspace" 2-3): each path into base/ and from there into copy/, with the stat data the record keeps.

FICLONE (Linux: XFS with reflink, btrfs, bcachefs, ...) makes a copy share the source's extents: no bytes move.
Where the filesystem cannot clone (ext4, tmpfs, across filesystems), the bytes are copied in the kernel with
copy_file_range, and the caller logs one warning with the counts. Never silently: every file is counted as cloned
or copied.

Standard library only: a large spawn runs part of the listing in a helper process started from this file
(`python -I -S copier.py`, `main`), because two threads of one process copying at once spend their time handing
the GIL over at every system call. Paths go in and entries come out in `marshal` (the same interpreter on both
sides).
"""

from __future__ import annotations

import errno
import fcntl
import marshal
import os
import stat
import struct
import sys

FICLONE = 0x40049409
"""ioctl(dest_fd, FICLONE, src_fd): share all of src's extents (linux/fs.h, _IOW(0x94, 9, int))."""

CANNOT_CLONE = frozenset(
    {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.ENOSYS, errno.EPERM}
)
"""The errors that mean "this filesystem (pair) does not clone": copy the bytes instead."""

CHUNK = 1 << 30

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_SOURCE_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_OWN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
"""Mode bits a file never gets at its creation here: set by fchmod after."""

Entry = tuple[str, str | None, bytes, bytes]
"""One copied path: (path, symlink target or None, the source's packed stat data, the copy's)."""


class Cloner:
    """Fills destination files from sources, cloning while the filesystem allows, and counts what it did."""

    __slots__ = ("can_clone", "cloned", "copied_bytes", "copied_files")

    def __init__(self) -> None:
        self.can_clone = True
        self.cloned = 0
        self.copied_files = 0
        self.copied_bytes = 0

    def fill(self, source_fd: int, dest_fd: int, size: int) -> None:
        """Make the empty file `dest_fd` a copy of the first `size` bytes of `source_fd` (read from offset 0)."""
        if self.can_clone:
            try:
                fcntl.ioctl(dest_fd, FICLONE, source_fd)
            except OSError as error:
                if error.errno not in CANNOT_CLONE:
                    raise
                self.can_clone = False  # one filesystem pair per Cloner: stop asking
            else:
                self.cloned += 1
                return
        self.copied_files += 1
        self.copied_bytes += copy_bytes(source_fd, dest_fd, size)


def copy_bytes(source_fd: int, dest_fd: int, size: int) -> int:
    """Copy `size` bytes (or up to the source's end) from offset 0; returns the bytes copied."""
    done = 0
    try:
        while done < size:
            moved = os.copy_file_range(source_fd, dest_fd, min(CHUNK, size - done), done, done)
            if moved == 0:
                break  # the source shrank since it was measured
            done += moved
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP) or done:
            raise
        return _copy_by_reads(source_fd, dest_fd, size)
    return done


def _copy_by_reads(source_fd: int, dest_fd: int, size: int) -> int:
    """The portable fallback: pread/pwrite in 1 MiB pieces."""
    done = 0
    while done < size:
        data = os.pread(source_fd, min(1 << 20, size - done), done)
        if not data:
            break
        view = memoryview(data)
        while view:
            written = os.pwrite(dest_fd, view, done)
            done += written
            view = view[written:]
    return done


def _open_dir(path: str, flags: int) -> int:
    """An fd of a directory, or -1 if it is gone or is not a directory now."""
    try:
        return os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return -1


class Copier:
    """Copies listed paths into base/ and copy/, cloning where it can; keeps the counts.

    Files are opened by name in their directory's fds (source, base, copy), kept while the paths stay in one
    directory (the listing is sorted): a whole path from the root is looked up once per directory, not per file.
    `packing` lays out a file's stat data (the core's `STAT_PACKING`); `private_mode` is the mode a file is made
    with when the umask would not let its own through."""

    def __init__(self, source: str, base: str, copy: str, umask: int, *, private_mode: int, packing: str) -> None:
        self.source, self.base, self.copy = source, base, copy
        self.umask = umask
        self.private_mode = private_mode
        self.packing = packing
        self._pack = struct.Struct(packing).pack
        self.into_base = Cloner()
        self.into_copy = Cloner()
        self._directory: str | None = None
        self._fds: tuple[int, int, int] | None = None  # source, base, copy: the fds of `_directory`

    def close(self) -> None:
        """Close the directory fds it holds."""
        fds, self._fds, self._directory = self._fds, None, None
        for fd in fds or ():
            os.close(fd)

    def counts(self) -> tuple[int, int, int]:
        """File copies cloned, file copies made of bytes, bytes copied (two copies per file: base and copy)."""
        return (
            self.into_base.cloned + self.into_copy.cloned,
            self.into_base.copied_files + self.into_copy.copied_files,
            self.into_base.copied_bytes + self.into_copy.copied_bytes,
        )

    def packed(self, st: os.stat_result) -> bytes:
        """The stat data change detection compares, as the record holds them."""
        return self._pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)

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

    def path(self, relative: str) -> Entry | None:
        """Copy one listed path; None if it is gone or is neither a regular file nor a symlink."""
        directory, _, name = relative.rpartition("/")
        fds = self._dir_fds(directory)
        if fds is None:
            return None  # listed, then removed with its directory (or it is a file now)
        try:
            fd = os.open(name, _READ, dir_fd=fds[0])
        except OSError as error:
            if error.errno == errno.ELOOP:
                return self.symlink(relative, name, fds)
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

    def regular(self, relative: str, name: str, fds: tuple[int, int, int], source_fd: int, st: os.stat_result) -> Entry:
        mode = stat.S_IMODE(st.st_mode)
        # Made with its mode when the umask lets it through (the directories are 0700 until filled): no fchmod.
        made_with = mode if not mode & (self.umask | _SPECIAL_BITS) else self.private_mode
        times = (st.st_atime_ns, st.st_mtime_ns)
        base_fd = os.open(name, os.O_RDWR | _CREATE, made_with, dir_fd=fds[1])
        try:
            self.into_base.fill(source_fd, base_fd, st.st_size)
            if made_with != mode:
                os.fchmod(base_fd, mode)
            # The base keeps bytes and mode, not times: it is only read, and the record holds the stat data.
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
        return (relative, None, self.packed(st), self.packed(copied))

    def symlink(self, relative: str, name: str, fds: tuple[int, int, int]) -> Entry | None:
        """Copy one symlink, by its name in its directory's fds (as a regular file is)."""
        try:
            st = os.lstat(name, dir_fd=fds[0])
            target = os.readlink(name, dir_fd=fds[0])
        except FileNotFoundError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            return None  # replaced since it was opened; the next spawn copies what is there
        os.symlink(target, name, dir_fd=fds[1])  # like a file in the base: no times
        os.symlink(target, name, dir_fd=fds[2])
        os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=fds[2], follow_symlinks=False)
        copied = os.lstat(name, dir_fd=fds[2])
        return (relative, target, self.packed(st), self.packed(copied))

    def run(self, paths: list[str]) -> tuple[list[Entry], tuple[str, str] | None]:
        """Copy paths in order: the entries, and (path, reason) of the failure that stopped it, if one did."""
        entries: list[Entry] = []
        try:
            for relative in paths:
                try:
                    entry = self.path(relative)
                except OSError as error:
                    return entries, (relative, error.strerror or str(error))
                if entry is not None:
                    entries.append(entry)
            return entries, None
        finally:
            self.close()


def main() -> int:
    """The helper: argv is source, base, copy, umask, private mode (octal) and the stat packing; stdin holds the
    paths (marshal); stdout gets (entries, failure, counts) (marshal)."""
    source, base, copy, umask, private_mode, packing = sys.argv[1:7]
    paths = marshal.loads(sys.stdin.buffer.read())
    copier = Copier(source, base, copy, int(umask, 8), private_mode=int(private_mode, 8), packing=packing)
    entries, failure = copier.run(paths)
    sys.stdout.buffer.write(marshal.dumps((entries, failure, copier.counts())))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
