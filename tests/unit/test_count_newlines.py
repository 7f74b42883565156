"""`count_newlines` (the bounder's hot path: numpy past WIDE_COUNT_BYTES once a host loaded it, `bytes.count`
below or without it) says what `bytes.count` says, for bytes and bytearrays, any window, on both sides of the
threshold; a process that did not load numpy never imports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from eukhe.output import WIDE_COUNT_BYTES, count_newlines, count_text, load_numpy

load_numpy()  # the counts below run the wide path (a host's); the path without numpy is checked in a fresh process

SIZES = st.sampled_from([0, 1, WIDE_COUNT_BYTES - 1, WIDE_COUNT_BYTES, WIDE_COUNT_BYTES + 1, 3 * WIDE_COUNT_BYTES + 7])


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


def test_a_wide_count_of_only_newlines_and_of_none() -> None:
    for size in (WIDE_COUNT_BYTES, 1 << 20):
        assert count_newlines(b"\n" * size) == size
        assert count_newlines(b"x" * size) == 0
        assert count_newlines(b"\n" * size, 1, size - 1) == size - 2


def test_numpy_loads_without_a_blas_thread_and_leaves_the_environment_as_it_was() -> None:
    """The daemon's fork server loads numpy before it forks: it must hold no thread then, and no job or kernel may
    inherit the single-threading it loads numpy with (a fresh interpreter: numpy loads once per process)."""
    script = (
        "import json, os\n"
        "from eukhe.output import load_numpy\n"
        "load_numpy()\n"
        "print(json.dumps([len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'),"
        " os.environ.get('OMP_NUM_THREADS')]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["OMP_NUM_THREADS"] = "3"  # one the user set stays theirs
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout) == [1, None, "3"]


def test_a_process_that_did_not_load_numpy_bounds_a_wide_output_without_importing_it() -> None:
    """A CLI or a lone bounder counts with `bytes.count`: numpy's 20 MB are a busy host's choice, not every one's."""
    script = (
        "import sys\n"
        "from eukhe.core.bound import DEFAULT_TRUNCATION\n"
        "from eukhe.output import BoundedOutput\n"
        "out = BoundedOutput(DEFAULT_TRUNCATION)\n"
        "for _ in range(8):\n"
        "    out.write(b'a line\\n' * 100_000)\n"
        "result = out.close()\n"
        "print(result.lines_kept + result.lines_dropped, 'numpy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["800000", "False"]
