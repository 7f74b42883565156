"""A cut output's artifact as an MCP resource: the `resource_link` an answer carries, and `resources/read` of it,
bounded and paged.

The link's URI is the artifact's `file://` URI; `?line=N` reads from line N (1-based; default 1). Only the artifacts
of the server's own session are served: a file directly in a directory `artifacts` of a directory named by the
session id, and a regular file (a symlink is never followed). A page is at most the default limits (2000 lines,
50 KiB), whole lines from its first one (a longer line is cut at a character boundary), so an artifact of any size is
never sent whole: reading a page costs one pass over the lines before it, and the page's bytes. The page ends with
one line saying which lines it holds, the artifact's size, and how to read on: the `read` tool from the next line, or
the link with `?line=` that line.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from eukhe.core.bound import CHAR_CONTEXT, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Keep, OutputLimits, window
from eukhe.output import read_facts
from eukhe.store.dirs import ARTIFACTS_NAME

PAGE = OutputLimits(DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Keep.HEAD)
"""The most of an artifact one `resources/read` gives."""
CHUNK = 1 << 20
SCHEME = "file"


class ArtifactRefusedError(LookupError):
    """The URI names no artifact of this session (or the file is gone): the reason in words."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of an artifact: its text, the lines it holds, where the next page starts (None: the end)."""

    text: str
    first: int
    last: int
    next_line: int | None
    size: int


def artifact_uri(path: str, line: int | None = None) -> str:
    """The `file://` URI of an artifact (from line `line` on, when given)."""
    uri = f"{SCHEME}://{quote(path)}"
    return uri if line is None or line <= 1 else f"{uri}?line={line}"


def parse_artifact_uri(uri: str) -> tuple[str, int] | None:
    """(path, first line) of a `file://` URI, or None when it is not one."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or parts.netloc not in ("", "localhost") or not parts.path:
        return None
    lines = parse_qs(parts.query).get("line", ["1"])
    try:
        line = int(lines[0])
    except ValueError:
        line = 0
    return unquote(parts.path), line


def check_artifact(path: str, session: str) -> Path:
    """The artifact `path` names, if it is one of `session`'s (else ArtifactRefusedError saying why)."""
    where = Path(path)
    if not where.is_absolute() or ".." in where.parts:
        raise ArtifactRefusedError(f"{path} is not an absolute path")
    if where.parent.name != ARTIFACTS_NAME or where.parent.parent.name != session:
        raise ArtifactRefusedError(f"{path} is not an artifact of session {session}")
    return where


def read_page(path: Path, first_line: int, limits: OutputLimits = PAGE) -> Page:
    """The page of the artifact from line `first_line` (1-based), at most `limits` (OSError when it cannot be read;
    ArtifactRefusedError when it is not a regular file or the line is not a line number)."""
    if first_line < 1:
        raise ArtifactRefusedError(f"line must be a line number (1 or more), got {first_line}")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            raise ArtifactRefusedError(f"{path} is not a regular file")
        start = _line_start(fd, first_line)
        if start is None:
            return Page("", first_line, first_line - 1, None, facts.st_size)
        chunk = os.pread(fd, limits.max_bytes + CHAR_CONTEXT + 1, start)
    finally:
        os.close(fd)
    kept = window(limits, read_facts(chunk, limits))
    shown = chunk[kept.start : kept.end]
    whole = shown.count(b"\n")
    last = first_line + max(kept.lines, 1) - 1 if shown else first_line - 1
    at_end = start + len(shown) >= facts.st_size
    next_line = None if at_end else first_line + (whole if whole and not kept.cut else 1)
    return Page(shown.decode("utf-8", "replace"), first_line, last, next_line, facts.st_size)


def _line_start(fd: int, line: int) -> int | None:
    """The byte offset where line `line` starts (None when the file has fewer lines)."""
    if line == 1:
        return 0
    seen = 0
    offset = 0
    while True:
        chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            return None
        position = 0
        while seen < line - 1:
            found = chunk.find(b"\n", position)
            if found < 0:
                break
            seen += 1
            position = found + 1
        if seen == line - 1:
            start = offset + position
            return start if start < offset + len(chunk) or os.pread(fd, 1, start) else None
        offset += len(chunk)


def page_text(path: Path, page: Page) -> str:
    """The page as the model reads it: its lines, then where they are in the artifact and how to read on."""
    text = page.text if not page.text or page.text.endswith("\n") else page.text + "\n"
    size = f"{page.size} bytes in all"
    if page.last < page.first:
        return text + f"[{path}: no line {page.first}: the artifact ends before it ({size})]"
    where = f"[{path}: lines {page.first}-{page.last} ({size})"
    if page.next_line is None:
        return text + where + "; the end of the artifact]"
    read_on = f'{{"path": "{path}", "offset": {page.next_line}}}'
    return (
        text + where + f"; read on with the read tool, {read_on}, or read the resource "
        f"{artifact_uri(str(path), page.next_line)}]"
    )
