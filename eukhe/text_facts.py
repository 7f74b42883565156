"""Reading the facts the bounder's core decides on: line lengths, newline counts and UTF-8 character boundaries.

A position in a line is a character boundary unless it falls inside a valid multi-byte UTF-8 sequence that starts
before it. Invalid bytes count as characters of one byte each, so invalid UTF-8 is data, never an error. The rule is
local (it looks at most 3 bytes back), which is why a store that keeps 3 bytes beyond the cap reads the same cuts as
the whole output.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType

from eukhe.core.bound import TextCounts, TextFacts
from eukhe.core.limits import Keep, OutputLimits

NEWLINE = 0x0A
WIDE_COUNT_BYTES = 1 << 14
"""A newline count over at least this many bytes runs in numpy (about 16 GB/s here, against 3 for `bytes.count`, whose
one-byte loop was most of a busy host's CPU time: bench/many_jobs.py); a shorter one stays with `bytes.count`."""


SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Set while numpy loads: its BLAS would start a thread pool at load (a fork server must not hold threads, and the
counts use no BLAS). Put back right after, so no job or kernel inherits them."""


@functools.cache
def load_numpy() -> ModuleType:
    """numpy, imported on the first wide count (a CLI that never streams much output never loads it; the daemon's
    fork server loads it before any fork), with its BLAS single-threaded."""
    saved = {name: os.environ.get(name) for name in SINGLE_THREADED}
    os.environ.update(SINGLE_THREADED)
    try:
        import numpy  # noqa: PLC0415 - deliberately lazy
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return numpy


def count_newlines(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """The newlines in `data[start:end]`, for 0 <= start <= end <= len(data): what `bytes.count` says, counted in
    place (no slice is copied)."""
    stop = len(data) if end is None else end
    if stop - start < WIDE_COUNT_BYTES:
        return data.count(b"\n", start, stop)
    numpy = load_numpy()
    window = numpy.frombuffer(data, dtype=numpy.uint8, count=stop - start, offset=start)
    return int(numpy.count_nonzero(window == NEWLINE))


def _sequence_length(line: bytes | bytearray, start: int) -> int:
    """Length of the valid UTF-8 multi-byte sequence starting at `start`, or 1 if there is none."""
    lead = line[start]
    if lead < 0xC2 or lead > 0xF4:
        return 1
    if lead < 0xE0:
        length, low, high = 2, 0x80, 0xBF
    elif lead < 0xF0:
        length = 3
        low, high = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F)}.get(lead, (0x80, 0xBF))
    else:
        length = 4
        low, high = {0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}.get(lead, (0x80, 0xBF))
    if start + length > len(line) or not low <= line[start + 1] <= high:
        return 1
    if any(not 0x80 <= line[i] <= 0xBF for i in range(start + 2, start + length)):
        return 1
    return length


def is_boundary(line: bytes | bytearray, position: int) -> bool:
    """Whether `position` (0..len) is a character boundary of `line`."""
    if position <= 0 or position >= len(line):
        return True
    return all(_sequence_length(line, start) <= position - start for start in range(max(0, position - 3), position))


def head_cut(line: bytes | bytearray, max_bytes: int) -> int:
    """The largest character boundary <= max_bytes in `line` (how much of the first line a head cut keeps)."""
    position = min(max_bytes, len(line))
    while not is_boundary(line, position):
        position -= 1
    return position


def tail_cut(line: bytes | bytearray, max_bytes: int) -> int:
    """The longest suffix of `line` of at most max_bytes bytes that starts at a character boundary."""
    position = max(0, len(line) - max_bytes)
    while not is_boundary(line, position):
        position += 1
    return len(line) - position


def line_lengths(text: bytes | bytearray) -> tuple[int, ...]:
    """Each line's length: the bytes up to and including a newline; a final unterminated piece is a line."""
    lengths: list[int] = []
    start = 0
    find = text.find
    while True:
        end = find(b"\n", start)
        if end < 0:
            break
        lengths.append(end + 1 - start)
        start = end + 1
    if start < len(text):
        lengths.append(len(text) - start)
    return tuple(lengths)


def read_facts(text: bytes | bytearray, limits: OutputLimits, starts_inside_line: bool = False) -> TextFacts:
    """The facts of a text for the core's window under `limits`."""
    lengths = line_lengths(text)
    cut = 0
    if lengths:
        if limits.keep is Keep.HEAD:
            cut = head_cut(text[: lengths[0]], limits.max_bytes)
        else:
            cut = tail_cut(text[len(text) - lengths[-1] :], limits.max_bytes)
    return TextFacts(lengths, starts_inside_line, cut)


def count_text(text: bytes | bytearray) -> TextCounts:
    """The counts of one streamed text: its length, newlines, and whether it ends with a newline."""
    length = len(text)
    # `count` neither copies nor allocates (the removal it replaced made a copy of every piece: new pages to map and
    # fault in for each read of a busy stream); this is the hot path of every bounded stream.
    newlines = count_newlines(text)
    return TextCounts(length, newlines, length > 0 and text[-1] == NEWLINE)
