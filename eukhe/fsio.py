"""Writing files whole: the one write-all loop and the one atomic replace of the shell.

`write_all` loops until every byte is in the kernel's hands (a short write on a regular file means the disk is full:
the next write raises). `atomic_write` writes a temporary file beside the target, fsyncs it, renames it over the
target and fsyncs the directory, so after a crash a reader finds the old file or the new one, never a part, and the
new one survives the crash once this returns.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eukhe.core.fsmode import PRIVATE_FILE_MODE

_COUNTER = itertools.count()


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of `data` to `fd` (looping over short writes)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (a rename, a new file) durable."""
    _fsync_path(directory, os.O_DIRECTORY)


FSYNC_THREADS = 8
"""Files fsynced at once by `fsync_all`: a journal commits fsyncs that wait together in one commit."""


def fsync_all(paths: list[Path]) -> None:
    """Make many files or directories durable together: their fsyncs run at once, so the journal commits them in
    one or two commits instead of one each (each commit waits for the disk)."""
    if len(paths) <= 1:
        for path in paths:
            _fsync_path(path)
        return
    with ThreadPoolExecutor(min(FSYNC_THREADS, len(paths)), thread_name_prefix="eukhe-fsync") as pool:
        for _ in pool.map(_fsync_path, paths):  # re-raises the first failure
            pass


def _fsync_path(path: Path, flags: int = os.O_NOFOLLOW) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = PRIVATE_FILE_MODE) -> None:
    """Replace `path` with `data` in one rename, durably (file and directory fsynced); the temp never lingers.

    `mode` is given at creation (0600 for eukhe's own files; a tool writing the user's file passes 0o666, which the
    umask narrows as any editor's would).
    """
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}-{next(_COUNTER)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_dir(path.parent)
