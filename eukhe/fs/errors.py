"""The one error of the file tools: `FsError`, a typed refusal with a reason, the path, and the transport version.

Every refusal of `fs.read`, `fs.write`, `fs.edit`, `fs.grep` and `fs.glob` is an `FsError`; so is every OS error on a
path (a missing file, a name too long, a symlink loop, a denied permission, a NUL byte): a handler never lets a bare
`OSError` or `ValueError` out. The kernel raises the same reason as `rlm.FsError`.
"""

from __future__ import annotations

import enum
import errno

from eukhe.errors import EukheError

VERSION = "transport@1"
"""The version of the fs request protocol every refusal carries."""


class Reason(enum.StrEnum):
    """Why a file tool refused a request."""

    OUTSIDE = "outside"  # outside every mount, the sandbox home, or a symlink / `..` that leaves the mounts
    SANDBOX = "sandbox"  # the sandbox policy refuses it: a deny_read path, or a write outside the writable roots
    NOT_FOUND = "not_found"  # nothing at the path (or the search root)
    NOT_A_FILE = "not_a_file"  # read of a directory, FIFO, socket or device
    IS_A_DIRECTORY = "is_a_directory"  # write onto a directory
    NOT_A_DIRECTORY = "not_a_directory"  # a path component is a file; glob under a file
    PATCH_FAILED = "patch_failed"  # the patch did not parse or does not apply; nothing was changed
    PERMISSION_DENIED = "permission_denied"  # EACCES / EPERM
    NAME_TOO_LONG = "name_too_long"  # ENAMETOOLONG
    SYMLINK_LOOP = "symlink_loop"  # ELOOP, or more than 40 symlinks in one path
    INVALID_PATH = "invalid_path"  # empty, or holds a NUL byte
    INVALID_PATTERN = "invalid_pattern"  # a grep regex or glob pattern that does not compile
    BAD_REQUEST = "bad_request"  # arguments of the wrong shape (unknown key, wrong type, offset < 1, ...)
    IO_ERROR = "io_error"  # any other OS error (no space, read-only file system, I/O error); the message names it


_ERRNO_REASONS = {
    errno.ENOENT: Reason.NOT_FOUND,
    errno.ENOTDIR: Reason.NOT_A_DIRECTORY,
    errno.EISDIR: Reason.IS_A_DIRECTORY,
    errno.EACCES: Reason.PERMISSION_DENIED,
    errno.EPERM: Reason.PERMISSION_DENIED,
    errno.ENAMETOOLONG: Reason.NAME_TOO_LONG,
    errno.ELOOP: Reason.SYMLINK_LOOP,
}


class FsError(EukheError):
    """A file tool refused: `reason` (a `Reason`), the `path` as the caller gave it (None when no path is at fault),
    a message for people, and `version`."""

    code = "fs_error"
    version = VERSION

    def __init__(self, reason: Reason, path: str | None, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path
        self.message = message

    def details(self) -> dict[str, object]:
        """What a caller acts on: the reason, the path and the protocol version (a host reply carries them)."""
        return {"reason": self.reason.value, "path": self.path, "version": self.version}

    def __repr__(self) -> str:
        return f"FsError({self.reason.value!r}, {self.path!r}, {self.message!r})"


def os_error(error: OSError, path: str | None, doing: str) -> FsError:
    """The `FsError` of an OS error met while `doing` something to `path` (the caller's path, never a host path)."""
    reason = _ERRNO_REASONS.get(error.errno or 0, Reason.IO_ERROR)
    what = error.strerror or type(error).__name__
    name = errno.errorcode.get(error.errno or 0)
    detail = f"{what} ({name})" if name and reason is Reason.IO_ERROR else what
    where = "" if path is None else f" {path}"
    return FsError(reason, path, f"cannot {doing}{where}: {detail}")
