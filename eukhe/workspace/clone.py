"""Copies of regular files that clone extents where the filesystem can (spec S3 "A subagent's workspace" 3).

FICLONE (Linux: XFS with reflink, btrfs, bcachefs, ...) makes the copy share the source's extents: no bytes move.
Where the filesystem cannot clone (ext4, tmpfs, across filesystems), the bytes are copied in the kernel with
copy_file_range, and the caller logs one warning with the counts. Never silently: every file is counted as cloned
or copied.
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass

FICLONE = 0x40049409
"""ioctl(dest_fd, FICLONE, src_fd): share all of src's extents (linux/fs.h, _IOW(0x94, 9, int))."""

CANNOT_CLONE = frozenset(
    {errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.ENOSYS, errno.EPERM}
)
"""The errors that mean "this filesystem (pair) does not clone": copy the bytes instead."""

CHUNK = 1 << 30


@dataclass(slots=True)
class Cloner:
    """Fills destination files from sources, cloning while the filesystem allows, and counts what it did."""

    can_clone: bool = True
    cloned: int = 0
    copied_files: int = 0
    copied_bytes: int = 0

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
