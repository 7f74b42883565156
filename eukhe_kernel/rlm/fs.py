"""`rlm.fs`: the file tools, as host requests (`fs.read` ... `fs.glob`), served in the session's working directory.

Each call blocks until the host answers (from an async cell too: the reply is read on the kernel's reader thread).
Paths are the kernel's own: relative ones start at the kernel's current directory; under a wrapped transport they
are sandbox paths, which the host maps to its own and back.
"""

from __future__ import annotations

from typing import Any

from eukhe_kernel.rlm.answers import Answer, FsError
from eukhe_kernel.runtime import HostRequestError


def _ask(kind: str, params: dict[str, Any]) -> Answer:
    from eukhe_kernel.api import host_request_sync  # noqa: PLC0415 - api imports the runtime, which imports rlm

    try:
        return Answer(host_request_sync(kind, params))
    except HostRequestError as error:
        details = error.details if isinstance(error.details, dict) else {}
        if error.code == "fs_error":
            raise FsError(
                str(details.get("reason", "bad_request")),
                details.get("path"),
                error.message,
                str(details.get("version", "transport@1")),
            ) from None
        raise


def read(path: str, offset: int | None = None, limit: int | None = None) -> Answer:
    """A text file's lines: `offset` is the first (1-based), `limit` how many; bounded like every output."""
    return _ask("fs.read", {"path": path, "offset": offset, "limit": limit})


def write(path: str, content: str) -> Answer:
    """Create or replace the file at `path` with `content` (atomically)."""
    return _ask("fs.write", {"path": path, "content": content})


def edit(patch: str) -> Answer:
    """Apply one multi-file patch (`*** Begin Patch` ... `*** End Patch`), completely or not at all."""
    return _ask("fs.edit", {"patch": patch})


def grep(pattern: str, path: str = ".", glob: str | None = None) -> Answer:
    """Lines matching the regex `pattern` under `path` (in files `glob` selects), as `PATH:LINE:TEXT`."""
    return _ask("fs.grep", {"pattern": pattern, "path": path, "glob": glob})


def glob(pattern: str, path: str = ".") -> Answer:
    """Files under `path` whose relative path matches `pattern` (`**` crosses directories)."""
    return _ask("fs.glob", {"pattern": pattern, "path": path})
