"""`fs.read`: a text file's lines, bounded like every output (issue 10).

The file is streamed in 1 MiB chunks: the lines in [offset, offset + limit) go to a `BoundedOutput` (which keeps the
head within the session's limits and writes the whole range to an artifact when it is cut), the rest are only
counted. A line is the bytes up to and including a newline; a last piece without one is a line too. Bytes that are
not UTF-8 read as U+FFFD in the answer's text.
"""

from __future__ import annotations

import os
import stat

from eukhe.core.pathmap import Kind
from eukhe.fs.context import FsContext, Locator, Place, bounded_fields
from eukhe.fs.errors import FsError, Reason, os_error
from eukhe.records.fs import ReadAnswer, ReadArgs

CHUNK = 1 << 20


def _after_newlines(chunk: bytes, count: int) -> int | None:
    """The offset just after the `count`-th newline of `chunk` (0 for count 0), or None if it has fewer."""
    position = 0
    for _ in range(count):
        found = chunk.find(b"\n", position)
        if found < 0:
            return None
        position = found + 1
    return position


def open_regular(place: Place, doing: str) -> int:
    """Open a checked regular file for reading (never following a symlink swapped in since the check, never blocking
    on a FIFO); refuse anything else with the caller's path."""
    if place.kind is Kind.MISSING:
        raise FsError(Reason.NOT_FOUND, place.asked, f"cannot {doing} {place.asked}: no such file")
    if place.kind is Kind.DIR:
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot {doing} {place.asked}: it is a directory")
    if place.kind is not Kind.FILE:
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot {doing} {place.asked}: not a regular file")
    try:
        fd = os.open(place.host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise os_error(error, place.asked, doing) from error
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError as error:
        os.close(fd)
        raise os_error(error, place.asked, doing) from error
    if not regular:
        os.close(fd)
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot {doing} {place.asked}: not a regular file")
    return fd


def read(context: FsContext, args: ReadArgs) -> ReadAnswer:
    """Lines `offset` (1-based, default 1) to `offset + limit - 1` (default: to the end) of a text file."""
    first = 1 if args.offset is None else args.offset
    if not isinstance(first, int) or isinstance(first, bool) or first < 1:
        raise FsError(Reason.BAD_REQUEST, args.path, f"offset must be a line number >= 1, got {args.offset!r}")
    if args.limit is not None and (not isinstance(args.limit, int) or isinstance(args.limit, bool) or args.limit < 0):
        raise FsError(Reason.BAD_REQUEST, args.path, f"limit must be a line count >= 0, got {args.limit!r}")
    place = Locator(context).place(args.path, "read")
    fd = open_regular(place, "read")
    end = None if args.limit is None else first + args.limit  # the first line not wanted
    output = context.bounded("fs-read")
    line = 1  # the number of the line the next byte belongs to
    last_byte = b""
    try:
        with os.fdopen(fd, "rb", buffering=0) as file:
            while chunk := file.read(CHUNK):
                newlines = chunk.count(b"\n")
                last_line = line + newlines  # the line the chunk's last byte... or the next chunk's first, belongs to
                if last_line >= first and (end is None or line < end):
                    start = 0 if first <= line else _after_newlines(chunk, first - line)
                    stop = len(chunk) if end is None or end > last_line else _after_newlines(chunk, end - line)
                    if start is not None and stop is not None and stop > start:
                        output.write(chunk[start:stop])
                line = last_line
                last_byte = chunk[-1:]
    except OSError as error:
        output.close()
        raise os_error(error, place.asked, "read") from error
    total = line - 1 if last_byte in (b"", b"\n") else line
    result = output.close()
    wanted = max(0, min(total + 1, end if end is not None else total + 1) - first)
    return ReadAnswer(absolute=place.shown, offset=first, lines=wanted, total_lines=total, **bounded_fields(result))
