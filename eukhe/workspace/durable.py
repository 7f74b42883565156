"""Crash-safe single steps on disk (spec S3 "A subagent's workspace" 6): one rename from a fixed-name copy beside a
path, fsync of the file and of its directory, and the record written the same way.

`CrashHook` is the test's injection point: it is called with a named point just before every rename or removal a
hand-back makes, so a test can kill the process exactly there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from eukhe.core.fsmode import PRIVATE_FILE_MODE
from eukhe.fsio import fsync_dir, write_all
from eukhe.workspace.layout import temp_beside

CrashHook = Callable[[str], None]
"""Called with a point's name ("remove:<path>", "take:<path>", "conflict:<path>", "record", "retire:base",
"retire:copy", "link:copy") just before that change is made."""


def no_hook(point: str) -> None:
    """The hook of a run nobody watches."""


def remove_leftover(path: Path) -> bool:
    """Remove what a crash left at a fixed-name path (a file, a symlink, or a directory); True if there was one."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        remove_tree(path)
    else:
        os.unlink(path)
    return True


def replace_from_beside(
    target: Path,
    write: Callable[[Path], None],
    hook: CrashHook,
    point: str,
    *,
    fsync_file: bool = True,
    fsync_parent: bool = True,
) -> None:
    """Replace `target` in one rename from its fixed-name copy: remove a leftover copy, `write` the new one, fsync it,
    rename it over the target, fsync the directory. A crash anywhere leaves the target old or new, never torn.
    `fsync_parent=False`: the caller fsyncs the directory later, once for all the renames it made there."""
    temp = temp_beside(target)
    remove_leftover(temp)
    write(temp)
    if fsync_file and not os.path.islink(temp):
        fd = os.open(temp, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    hook(point)
    os.rename(temp, target)
    if fsync_parent:
        fsync_dir(target.parent)


def write_bytes_private(path: Path, data: bytes) -> None:
    """Write a new private file (0600 at creation) with `data`, and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_record(path: Path, data: bytes, hook: CrashHook = no_hook, point: str = "record") -> None:
    """Write a record atomically: its fixed-name copy, fsync, rename, fsync the directory."""
    replace_from_beside(path, lambda temp: write_bytes_private(temp, data), hook, point, fsync_file=False)


def unlink_durably(path: Path) -> None:
    """Remove a file if present and make the removal durable."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        fsync_dir(path.parent)


def remove_tree(path: Path) -> None:
    """Remove a directory tree (gone already: nothing to do), also one holding the user's read-only directories."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except PermissionError:
        # A copied directory kept the user's mode (say 0555): give the owner access back, then remove.
        for directory, _, _ in os.walk(path):
            os.chmod(directory, stat.S_IMODE(os.lstat(directory).st_mode) | stat.S_IRWXU)
        shutil.rmtree(path)
