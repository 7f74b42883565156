"""A kernel's `fs.read` by reference (docs/fs.md, "By reference"): the host names the bytes, the kernel reads them,
and what the kernel ends with is exactly the answer the host would have sent over the pipe, for any file and range.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from eukhe.core.bound import Off, On, OutputLimits
from eukhe.core.reference import BY_REFERENCE_MIN_BYTES, answers_by_reference
from eukhe.fs import FsContext, ReadArgs, serve
from eukhe.fs.serve import decode_args
from eukhe.records.fs import KernelReadArgs
from eukhe_kernel.rlm import fs as kernel_fs

BIG = BY_REFERENCE_MIN_BYTES


def _inline(context: FsContext, params: dict[str, Any]) -> dict[str, Any]:
    return serve(context, "fs.read", params)


def _by_reference(context: FsContext, params: dict[str, Any]) -> dict[str, Any]:
    return serve(context, "fs.read", {**params, "by_reference": True}, kernel=True)


@pytest.fixture(autouse=True)
def _fresh_kernel_state() -> None:
    kernel_fs._by_reference["misses"] = 0


contents = st.builds(
    lambda head, piece, size, tail: head + (piece * (size // len(piece) + 1))[:size] + tail,
    st.binary(max_size=64),
    st.builds(lambda body, newline: body + (b"\n" if newline else b"."), st.binary(max_size=300), st.booleans()),
    st.sampled_from([0, 100, BIG - 1, BIG, BIG + 1, 2 * BIG, 3 * BIG]) | st.integers(0, 3 * BIG),
    st.binary(max_size=64) | st.sampled_from([b"\xff\xfe", "é".encode()[:1], b"\n"]),
)
"""Files from empty to three times the threshold: lines of any length, bytes that are not UTF-8, with and without
a last newline."""


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=contents, offset=st.none() | st.integers(1, 400), limit=st.none() | st.integers(0, 300_000))
def test_an_answer_by_reference_filled_by_the_kernel_is_the_answer_over_the_pipe(
    tmp_path: Path, data: bytes, offset: int | None, limit: int | None
) -> None:
    kernel_fs._by_reference["misses"] = 0
    (tmp_path / "f").write_bytes(data)
    context = FsContext(tmp_path, truncation=Off())
    params = {"path": "f", "offset": offset, "limit": limit}
    inline = _inline(context, params)
    answer = _by_reference(context, params)
    if "text_at" in answer:
        assert answer["output"]["text"] == "" and answer["output"]["text_base64"] is None
        assert answer["text_at"]["length"] >= BIG
        assert kernel_fs.fill_by_reference(answer)
        event("by reference")
    else:  # too short to be worth it: the same answer as over the pipe
        assert answer["output"]["bytes_kept"] < BIG
    assert answer == inline


def test_a_large_read_is_answered_by_reference_and_a_small_or_cut_one_is_not(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"y" * 99 + b"\n" + b"x" * BIG)
    (tmp_path / "small").write_bytes(b"x" * (BIG - 1))
    whole = FsContext(tmp_path, truncation=Off())
    big = _by_reference(whole, {"path": "big"})
    assert big["text_at"] == {
        "path": str((tmp_path / "big").resolve()),
        "start": 0,
        "length": BIG + 100,
        "crc32": big["text_at"]["crc32"],
    }
    assert _by_reference(whole, {"path": "big", "offset": 2})["text_at"]["start"] == 100  # the second line's byte
    assert "text_at" not in _by_reference(whole, {"path": "small"})
    assert "text_at" not in _inline(whole, {"path": "big"})  # not asked: the text
    cut = FsContext(tmp_path, truncation=On(OutputLimits(max_bytes=4 * BIG, max_lines=1)))
    assert "text_at" not in _by_reference(cut, {"path": "big"})  # a bounded text is not the file's bytes


def test_bytes_that_are_not_the_hosts_are_a_miss_and_three_in_a_row_stop_asking(tmp_path: Path) -> None:
    data = b"line\n" * (BIG // 5 + 1)
    (tmp_path / "f").write_bytes(data)
    context = FsContext(tmp_path, truncation=Off())
    good = _by_reference(context, {"path": "f"})
    changed = msgspec.json.decode(msgspec.json.encode(good))
    changed["text_at"]["crc32"] ^= 1  # what a file changed since the host read it looks like
    assert not kernel_fs.fill_by_reference(changed) and "text_at" in changed and changed["output"]["text"] == ""
    gone = msgspec.json.decode(msgspec.json.encode(good))
    gone["text_at"]["path"] = str(tmp_path / "not-shared")  # a mount that does not show the host's files
    assert not kernel_fs.fill_by_reference(gone)
    assert kernel_fs._by_reference["misses"] == 2
    assert kernel_fs.fill_by_reference(msgspec.json.decode(msgspec.json.encode(good)))  # a hit resets the count
    assert kernel_fs._by_reference["misses"] == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), str(tmp_path), str(tmp_path / "not-shared")):  # never blocks, never reads a non-file
        miss = msgspec.json.decode(msgspec.json.encode(good))
        miss["text_at"]["path"] = path
        assert not kernel_fs.fill_by_reference(miss)
    assert kernel_fs._by_reference["misses"] == kernel_fs.MISSES_BEFORE_TEXT


def test_only_a_kernel_may_ask_for_an_answer_by_reference() -> None:
    assert decode_args("fs.read", {"path": "x", "by_reference": True}, kernel=True) == KernelReadArgs(
        path="x", by_reference=True
    )
    assert decode_args("fs.read", {"path": "x"}, kernel=True) == KernelReadArgs(path="x", by_reference=False)
    with pytest.raises(Exception, match="by_reference"):
        decode_args("fs.read", {"path": "x", "by_reference": True})  # the CLI's, the daemon's, the API's
    assert decode_args("fs.read", {"path": "x"}) == ReadArgs(path="x")


def test_answers_by_reference_exactly_when_asked_whole_and_large() -> None:
    sizes = (0, 1, BIG - 1, BIG, BIG + 1, 10 * BIG)
    for asked, span, kept, bytes_dropped, lines_dropped in itertools.product(
        (False, True), sizes, sizes, (0, 1, BIG), (0, 1)
    ):
        expected = asked and span >= BIG and kept == span and bytes_dropped == 0 and lines_dropped == 0
        assert answers_by_reference(asked, span, kept, bytes_dropped, lines_dropped) is expected
