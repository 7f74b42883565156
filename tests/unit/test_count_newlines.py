"""`count_newlines` (the bounder's hot path, StringZilla's SIMD count) says what `bytes.count` says, for bytes and
bytearrays, any window, short and long; a bounded stream's memory stays its own (no large library loads for it)."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from eukhe.output import count_newlines, count_text

SIZES = st.sampled_from([0, 1, 2, 31, 32, 33, 63, 64, 65, 4095, 4096, 1 << 14, (1 << 16) + 7])
"""Around the vector widths (16, 32, 64 bytes) the SIMD count steps in, and long enough for its main loop."""


@st.composite
def windows(draw: st.DrawFn) -> tuple[bytes, int, int]:
    size = draw(SIZES)
    fill = draw(st.binary(min_size=1, max_size=64))
    data = bytearray((fill * (size // len(fill) + 1))[:size])
    for spot in draw(st.lists(st.integers(0, max(0, size - 1)), max_size=50)):
        if size:
            data[spot] = 0x0A
    start = draw(st.integers(0, size))
    end = draw(st.integers(start, size))
    return bytes(data), start, end


@given(windows(), st.booleans())
def test_count_newlines_is_bytes_count(window: tuple[bytes, int, int], as_bytearray: bool) -> None:
    data, start, end = window
    text = bytearray(data) if as_bytearray else data
    assert count_newlines(text, start, end) == data.count(b"\n", start, end)
    assert count_newlines(text, start) == data.count(b"\n", start)
    assert count_text(text).newlines == data.count(b"\n")


def test_a_long_count_of_only_newlines_and_of_none() -> None:
    for size in (1 << 14, 1 << 20):
        assert count_newlines(b"\n" * size) == size
        assert count_newlines(b"x" * size) == 0
        assert count_newlines(b"\n" * size, 1, size - 1) == size - 2


def test_a_lone_process_bounds_a_long_output_in_little_memory_and_no_thread() -> None:
    """A CLI or a lone bounder pays for the counts in time only: the count's library grows the RSS by under 2 MiB
    (the numpy it replaced, by 20 MB), 800,000 lines are counted exactly in under 4 MiB more, and no thread starts."""
    script = (
        "import os, resource\n"
        "def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "bare = rss()\n"
        "import stringzilla\n"
        "library = rss() - bare\n"
        "from eukhe.core.bound import DEFAULT_TRUNCATION\n"
        "from eukhe.output import BoundedOutput\n"
        "before = rss()\n"
        "out = BoundedOutput(DEFAULT_TRUNCATION)\n"
        "piece = b'a line\\n' * 100_000\n"
        "for _ in range(8):\n"
        "    out.write(piece)\n"
        "result = out.close()\n"
        "print(result.lines_kept + result.lines_dropped, len(os.listdir('/proc/self/task')), library, rss() - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    lines, threads, library_kib, stream_kib = (int(word) for word in done.stdout.split())
    assert (lines, threads) == (800_000, 1)
    assert library_kib < 2048, library_kib
    assert stream_kib < 4096, stream_kib
