"""`rlm.fs`: the file tools, as host requests (`fs.read` ... `fs.glob`), served in the session's working directory.

Each call blocks until the host answers (from an async cell too: the reply is read on the kernel's reader thread).
Paths are the kernel's own: relative ones start at the kernel's current directory; under a wrapped transport they
are sandbox paths, which the host maps to its own and back.

`read` asks for its answer by reference: a large text is not sent over the pipe, but named (file, start, length,
CRC-32), and read here through the kernel's own mount; bytes that do not match make it ask again for the text.
"""

from __future__ import annotations

import base64
import os
import stat
import zlib
from typing import Any

from eukhe_kernel.api import host_request_sync
from eukhe_kernel.rlm.answers import Answer, FsError
from eukhe_kernel.runtime import HostRequestError


def _ask(kind: str, params: dict[str, Any]) -> Answer:
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
    params: dict[str, Any] = {"path": path, "offset": offset, "limit": limit}
    if _by_reference["misses"] < MISSES_BEFORE_TEXT:
        answer = _ask("fs.read", {**params, "by_reference": True})
        if "text_at" not in answer:
            return answer
        if fill_by_reference(answer):
            return answer
    return _ask("fs.read", params)  # the bytes here are not the host's: the text comes over the pipe


MISSES_BEFORE_TEXT = 3
"""Answers by reference whose bytes did not match, in a row, before this kernel asks only for the text: its mounts
do not show the host's files (a file changed under one read is a miss too, so one is not enough)."""

_by_reference = {"misses": 0}


def fill_by_reference(answer: dict[str, Any]) -> bool:
    """Turn an answer by reference into the answer the host would have sent: read `text_at`'s bytes through this
    kernel's mount and put their text in `output`. False (answer unchanged) when those bytes are not the host's: a
    file changed since the host read it, or a mount that is not shared (then later reads ask for the text)."""
    span = answer["text_at"]
    try:
        fd = os.open(span["path"], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        data = None
    else:
        try:
            data = _read_at(fd, span["start"], span["length"]) if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except OSError:
            data = None
        finally:
            os.close(fd)
    if data is None or len(data) != span["length"] or zlib.crc32(data) != span["crc32"]:
        _by_reference["misses"] += 1
        return False
    _by_reference["misses"] = 0
    output = answer["output"]
    try:
        output["text"] = data.decode("utf-8")
    except UnicodeDecodeError:  # as the host sends it: U+FFFD in the text, the exact bytes in base64
        output["text"] = data.decode("utf-8", errors="replace")
        output["text_base64"] = base64.b64encode(data).decode("ascii")
    del answer["text_at"]
    return True


def _read_at(fd: int, start: int, length: int) -> bytes:
    """Up to `length` bytes from offset `start` (fewer only at the end of the file)."""
    parts: list[bytes] = []
    got = 0
    while got < length:
        part = os.pread(fd, length - got, start + got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


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
