"""Opening paths without following symlinks, so that what was checked is what is opened.

A path checked by name and then opened by name can be raced: a confined process swaps a directory of it for a
symlink in between, and the open follows the link out of the workspace. Here an absolute, symlink-free path (as the
file tools' `resolve` answers, or eukhe's own path of a file it reads) is opened so that no component of it is
followed as a symlink: `openat2` with `RESOLVE_NO_SYMLINKS` where the kernel has it (Linux 5.6), else one component
at a time from directory descriptors, each opened with `O_NOFOLLOW`. A symlink anywhere on the way is `ELOOP`.

`read_regular` reads a small file that eukhe itself reads from a place a job can write (a `.gitignore`, a project's
settings, a skill's files): opened as above, never blocking (a FIFO does not hang it), only a regular file, and at
most `cap` bytes (a link to `/dev/zero`, or a huge file, is refused instead of read).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import threading
from collections.abc import Iterator

SYS_OPENAT2 = 437
"""The number of `openat2` on every Linux architecture (the unified syscall table)."""
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
AT_FDCWD = -100


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


_openat2_state: list[bool | None] = [None]  # None: not tried yet; then whether the kernel has it
_probe_lock = threading.Lock()
_libc: ctypes.CDLL | None = None


def _openat2(dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int | None:
    """`openat2`, or None when this kernel (or a seccomp filter) does not offer it."""
    global _libc
    if _openat2_state[0] is False:
        return None
    if _libc is None:
        with _probe_lock:
            if _libc is None:
                _libc = ctypes.CDLL(None, use_errno=True)
                _libc.syscall.restype = ctypes.c_long
    creates = bool(flags & os.O_CREAT) or flags & os.O_TMPFILE == os.O_TMPFILE  # O_TMPFILE holds O_DIRECTORY
    how = _OpenHow(flags | os.O_CLOEXEC, mode if creates else 0, resolve)  # openat2 refuses a mode it would not use
    fd = _libc.syscall(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        _openat2_state[0] = True
        return int(fd)
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM) and _openat2_state[0] is None:
        _openat2_state[0] = False  # no openat2 here (EPERM: a seccomp filter that refuses unknown calls)
        return None
    raise OSError(code, os.strerror(code), path)


def use_openat2(enabled: bool | None) -> None:
    """Force the component walk (False), force `openat2` (True) or let the first call decide (None): for tests,
    which run both ways on one kernel."""
    _openat2_state[0] = enabled


def _names(path: str) -> list[str]:
    """The components of a path, refusing empty paths and NUL bytes as the kernel would."""
    if not path or "\0" in path:
        raise OSError(errno.ENOENT if not path else errno.EINVAL, "invalid path", path)
    return [name for name in path.split("/") if name not in ("", ".")]


def _walk_open(dir_fd: int, path: str, flags: int, mode: int, *, beneath: bool) -> int:
    """The component walk: each directory opened `O_PATH | O_NOFOLLOW` from the one before, then checked to be a
    directory (a symlink there is `ELOOP`); the last component opened with `O_NOFOLLOW`."""
    names = _names(path)
    if path.startswith("/"):
        if beneath:
            raise OSError(errno.EXDEV, "an absolute path is not beneath the directory", path)
        current = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    else:
        current = os.dup(dir_fd) if dir_fd != AT_FDCWD else os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not names:
            return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=current)
        for index, name in enumerate(names):
            if name == "..":
                raise OSError(errno.EXDEV if beneath else errno.EINVAL, "a path here holds no '..'", path)
            if index == len(names) - 1:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
            following = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            kind = os.fstat(following).st_mode
            os.close(current)
            current = following
            if stat.S_ISLNK(kind):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if not stat.S_ISDIR(kind):
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        raise AssertionError("unreachable")
    finally:
        os.close(current)


def open_nofollow(path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
    """Open `path` following no symlink in any component (`ELOOP` where one is). An absolute path must be
    symlink-free and hold no `..`; a relative one is opened beneath `dir_fd` and may not leave it."""
    if "\0" in path:
        raise OSError(errno.EINVAL, "a path cannot hold a NUL byte", path)
    beneath = dir_fd is not None
    resolve = RESOLVE_NO_SYMLINKS | (RESOLVE_BENEATH if beneath else 0)
    base = AT_FDCWD if dir_fd is None else dir_fd
    if ".." in path.split("/"):
        raise OSError(errno.EXDEV if beneath else errno.EINVAL, "a path here holds no '..'", path)
    opened = _openat2(base, path, flags, mode, resolve)
    if opened is not None:
        return opened
    return _walk_open(base, path, flags, mode, beneath=beneath)


def open_dir(path: str, *, dir_fd: int | None = None) -> int:
    """A directory opened for listing and as the base of `*at` calls, following no symlink."""
    return open_nofollow(path, os.O_RDONLY | os.O_DIRECTORY, dir_fd=dir_fd)


class NotRegularError(OSError):
    """What is there is not a regular file (a FIFO, a device, a socket, a directory)."""


class TooLargeError(OSError):
    """A file larger than the reader's cap."""


def read_regular(path: str, cap: int, *, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file of at most `cap` bytes, opened following no symlink and never blocking.
    `NotRegularError`, `TooLargeError`, or the `OSError` of the open (`ELOOP` for a symlink)."""
    fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularError(errno.EINVAL, "not a regular file", path)
        if info.st_size > cap:
            raise TooLargeError(errno.EFBIG, f"larger than {cap} bytes", path)
        return b"".join(_chunks(fd, cap, path))
    finally:
        os.close(fd)


def _chunks(fd: int, cap: int, path: str) -> Iterator[bytes]:
    """Read to the end, refusing more than `cap` bytes (a file that grew after its stat)."""
    total = 0
    while chunk := os.read(fd, max(1, min(1 << 16, cap + 1 - total))):
        total += len(chunk)
        if total > cap:
            raise TooLargeError(errno.EFBIG, f"larger than {cap} bytes", path)
        yield chunk
