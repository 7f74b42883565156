"""`fs.write`: create or replace one file, atomically.

The content goes to a new temporary file in the target's directory, is flushed to disk (fsync), and is renamed over
the target, so a reader sees the old file or the new one, never a part. These are the user's files ("Local access"
3): a new file and its missing parent directories get the umask's mode; a replaced file keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from eukhe.core.pathmap import Kind
from eukhe.fs.context import FsContext, Locator
from eukhe.fs.errors import FsError, Reason, os_error
from eukhe.fsio import fsync_dir, write_all
from eukhe.records.fs import WriteAnswer, WriteArgs

USER_FILE_MODE = 0o666
"""The mode a new user file asks for; the umask takes its bits away."""


def encode_content(content: str, path: str) -> bytes:
    """The UTF-8 bytes of a text (undecodable bytes carried as surrogate escapes go back as they were)."""
    if not isinstance(content, str):
        raise FsError(Reason.BAD_REQUEST, path, f"content must be a string, got {type(content).__name__}")
    try:
        return content.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as error:
        raise FsError(Reason.BAD_REQUEST, path, f"content is not encodable as UTF-8: {error.reason}") from error


def make_parents(directory: str) -> list[str]:
    """Create `directory` and its missing parents with the umask's mode; the ones created, outermost first."""
    missing: list[str] = []
    probe = directory
    while not os.path.lexists(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    made: list[str] = []
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
            continue  # made by someone else meanwhile: theirs, not ours to remove
        made.append(path)
    return made


def remove_dirs(made: list[str]) -> None:
    """Remove directories `make_parents` created (innermost first), where they are still empty."""
    for path in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def write_new_file(path: str, data: bytes, mode: int | None) -> None:
    """Write `data` to a file that must not exist yet, flush it to disk; `mode` set when given, else the umask's.
    A failure after the file was made (a full disk) removes it: no part of it is left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, USER_FILE_MODE)
    try:
        if mode is not None:
            os.fchmod(fd, stat_mode(mode))
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    finally:
        os.close(fd)


def stat_mode(mode: int) -> int:
    """The permission bits of a st_mode."""
    return mode & 0o7777


def sync_dir(directory: str) -> None:
    """Flush a directory's entries to disk, where the file system allows it (best effort: durability, not safety)."""
    with contextlib.suppress(OSError):
        fsync_dir(Path(directory))


def write(context: FsContext, args: WriteArgs) -> WriteAnswer:
    """Create or replace the file at `path` with `content`."""
    data = encode_content(args.content, args.path)
    place = Locator(context).place(args.path, "write")
    if place.kind is Kind.DIR:
        raise FsError(Reason.IS_A_DIRECTORY, place.asked, f"cannot write {place.asked}: it is a directory")
    if place.kind is Kind.OTHER:
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot write {place.asked}: not a regular file")
    directory, name = os.path.split(place.host)
    made: list[str] = []
    temp = None
    try:
        mode = os.stat(place.host).st_mode if place.kind is Kind.FILE else None
        made = make_parents(directory)
        temp = os.path.join(directory, f".{name[:200]}.{secrets.token_hex(6)}.eukhe-write")
        write_new_file(temp, data, mode)
        os.rename(temp, place.host)
        temp = None
    except OSError as error:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        remove_dirs(made)
        raise os_error(error, place.asked, "write") from error
    sync_dir(directory)
    return WriteAnswer(absolute=place.shown, bytes_written=len(data), created=place.kind is Kind.MISSING)
