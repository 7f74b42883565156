"""`fs.read`: a text file's lines, bounded like every output.

The file is streamed in 1 MiB chunks: the lines in [offset, offset + limit) go to a `BoundedOutput` (which keeps the
head within the session's limits and writes the whole range to an artifact when it is cut), the rest are only
counted. A line is the bytes up to and including a newline; a last piece without one is a line too. Bytes that are
not UTF-8 read as U+FFFD in the answer's text.

A kernel's read may be answered by reference (`read_for_kernel`): the answer names the bytes of the file its text
is, and the kernel reads them through its own mount (docs/fs.md, "By reference").
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from dataclasses import dataclass, replace

from eukhe.core.pathmap import Kind
from eukhe.core.reference import answers_by_reference
from eukhe.fs.context import FsContext, Locator, Place, bounded_fields
from eukhe.fs.errors import FsError, Reason, os_error
from eukhe.fs.opening import open_checked
from eukhe.output import BoundedResult, count_newlines
from eukhe.records.fs import KernelReadArgs, ReadAnswer, ReadArgs, ReadByReference, TextSpan

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
    """Open a checked regular file for reading (following no symlink on its path, so none swapped in since the
    check; never blocking on a FIFO); refuse anything else with the caller's path."""
    if place.kind is Kind.MISSING:
        raise FsError(Reason.NOT_FOUND, place.asked, f"cannot {doing} {place.asked}: no such file")
    if place.kind is Kind.DIR:
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot {doing} {place.asked}: it is a directory")
    if place.kind is not Kind.FILE:
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot {doing} {place.asked}: not a regular file")
    fd = open_checked(place.host, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY, place.asked, doing)
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError as error:
        os.close(fd)
        raise os_error(error, place.asked, doing) from error
    if not regular:
        os.close(fd)
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot {doing} {place.asked}: not a regular file")
    return fd


def _skip_hole(fd: int, position: int) -> int:
    """How many bytes of a hole start at `position` (moving the file's offset past them): a sparse file's holes
    hold no newline, so counting lines need not read them (a 50 GB sparse file counts at once)."""
    try:
        data = os.lseek(fd, position, os.SEEK_DATA)
    except OSError as error:
        if error.errno != errno.ENXIO:  # the file system cannot tell: read on
            os.lseek(fd, position, os.SEEK_SET)
            return 0
        data = os.lseek(fd, 0, os.SEEK_END)  # no data after `position`: the rest is a hole
    return data - position


@dataclass(frozen=True, slots=True)
class _Range:
    """What a read found: the answer's fields but its text, the bounded text, and the bytes of the file that the
    range's lines are (`length` from `start`; `crc32` their sum when it was asked)."""

    absolute: str
    offset: int
    lines: int
    total_lines: int
    result: BoundedResult
    start: int = 0
    length: int = 0
    crc32: int = 0


def _read(context: FsContext, args: ReadArgs, checksum: bool) -> _Range:
    """The range `args` asks for (its bytes summed when `checksum`)."""
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
    position = 0  # the file offset of the chunk
    span_start: int | None = None
    span_stop = 0
    crc = 0
    try:
        with os.fdopen(fd, "rb", buffering=0) as file:
            while True:
                if end is not None and line >= end:  # past the range: only lines are counted, so holes are skipped
                    skipped = _skip_hole(fd, position)
                    if skipped:
                        position += skipped
                        last_byte = b"\0"  # a hole reads as zeros: no newline in it
                chunk = file.read(CHUNK)
                if not chunk:
                    break
                newlines = count_newlines(chunk)
                last_line = line + newlines  # the line the chunk's last byte... or the next chunk's first, belongs to
                if last_line >= first and (end is None or line < end):
                    start = 0 if first <= line else _after_newlines(chunk, first - line)
                    stop = len(chunk) if end is None or end > last_line else _after_newlines(chunk, end - line)
                    if start is not None and stop is not None and stop > start:
                        piece = chunk[start:stop]
                        output.write(piece)
                        if span_start is None:
                            span_start = position + start
                        span_stop = position + stop
                        if checksum:
                            crc = zlib.crc32(piece, crc)
                line = last_line
                last_byte = chunk[-1:]
                position += len(chunk)
    except OSError as error:
        output.close()
        raise os_error(error, place.asked, "read") from error
    total = line - 1 if last_byte in (b"", b"\n") else line
    result = output.close()
    wanted = max(0, min(total + 1, end if end is not None else total + 1) - first)
    found = _Range(place.shown, first, wanted, total, result)
    if span_start is None:
        return found
    return replace(found, start=span_start, length=span_stop - span_start, crc32=crc)


def read(context: FsContext, args: ReadArgs) -> ReadAnswer:
    """Lines `offset` (1-based, default 1) to `offset + limit - 1` (default: to the end) of a text file."""
    return _answer(_read(context, args, checksum=False))


def _answer(found: _Range) -> ReadAnswer:
    """The answer with its text."""
    return ReadAnswer(
        absolute=found.absolute,
        offset=found.offset,
        lines=found.lines,
        total_lines=found.total_lines,
        **bounded_fields(found.result),
    )


def read_for_kernel(context: FsContext, args: KernelReadArgs) -> ReadAnswer | ReadByReference:
    """`read` for a kernel cell: by reference when it asked and the core agrees (`eukhe.core.reference`); the
    answer's `absolute` is the kernel's own symlink-free path of the file, which `text_at` names."""
    found = _read(context, args, checksum=args.by_reference)
    result = found.result
    if not answers_by_reference(
        args.by_reference, found.length, result.bytes_kept, result.bytes_dropped, result.lines_dropped
    ):
        return _answer(found)
    return ReadByReference(
        absolute=found.absolute,
        offset=found.offset,
        lines=found.lines,
        total_lines=found.total_lines,
        output=result.to_record(with_text=False),
        text_at=TextSpan(path=found.absolute, start=found.start, length=found.length, crc32=found.crc32),
    )
