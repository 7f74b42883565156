"""`fs.write`: create or replace one file, atomically.

The content goes to a new temporary file in the target's directory, is flushed to disk (fsync), and is renamed over
the target, so a reader sees the old file or the new one, never a part. Everything is done through the descriptor of
the target's directory, opened following no symlink (`eukhe.fs.opening`): a directory swapped for a symlink after
the check cannot lead the write out of the checked place. These are the user's files ("Local access"
3): a new file and its missing parent directories get the umask's mode; a replaced file keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

from eukhe.core.pathmap import Kind
from eukhe.fs.context import FsContext, Locator
from eukhe.fs.errors import FsError, Reason, os_error
from eukhe.fs.opening import Parents
from eukhe.fsio import write_all
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


NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
"""A new file only: never one that is there, never through a symlink."""


def write_new_file(name: str, data: bytes, mode: int | None, dir_fd: int) -> None:
    """Write `data` to a file that must not exist yet in the open directory `dir_fd`, flush it to disk; `mode` set
    when given, else the umask's. A failure after the file was made (a full disk) removes it: no part is left."""
    fd = os.open(
        name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, USER_FILE_MODE, dir_fd=dir_fd
    )
    try:
        if mode is not None:
            os.fchmod(fd, stat_mode(mode))
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    finally:
        os.close(fd)


def stat_mode(mode: int) -> int:
    """The permission bits of a st_mode."""
    return mode & 0o7777


def write(context: FsContext, args: WriteArgs) -> WriteAnswer:
    """Create or replace the file at `path` with `content`."""
    data = encode_content(args.content, args.path)
    place = Locator(context).place(args.path, "write")
    if place.kind is Kind.DIR:
        raise FsError(Reason.IS_A_DIRECTORY, place.asked, f"cannot write {place.asked}: it is a directory")
    if place.kind is Kind.OTHER:
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot write {place.asked}: not a regular file")
    with Parents(place.asked, "write") as parents:
        directory, name = parents.parent(place.host, make=True)
        temp = None
        try:
            try:
                found = os.stat(name, dir_fd=directory, follow_symlinks=False)
            except FileNotFoundError:
                found = None
            if found is not None and not stat.S_ISREG(found.st_mode):
                raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot write {place.asked}: not a regular file")
            temp = f".{name[:200]}.{secrets.token_hex(6)}.eukhe-write"
            write_new_file(temp, data, None if found is None else found.st_mode, directory)
            os.rename(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
            temp = None
        except OSError as error:
            if temp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=directory)
            parents.remove_made()
            raise os_error(error, place.asked, "write") from error
        parents.sync(os.path.dirname(place.host))
    return WriteAnswer(absolute=place.shown, bytes_written=len(data), created=found is None)
