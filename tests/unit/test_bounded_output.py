"""BoundedOutput, the shell over the bounder's core: snapshots equal bounding the whole stream, with skips, across
chunkings; counts conserve every byte; the artifact holds the full output; `Off` keeps everything; a spill holds
every byte from the first one, becomes the artifact past the limits and goes at a close within them."""

from __future__ import annotations

import errno
import itertools
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import bound
from eukhe.core.bound import DEFAULT_TRUNCATION, Keep, Off, On, OutputLimits
from eukhe.output import BoundedOutput, BoundedResult, is_boundary, line_lengths, read_facts
from tests.laws.bound_support import chunked, limits_st, reference_boundaries, reference_lines, texts


def whole_result(text: bytes, limits: OutputLimits) -> tuple[bytes, bound.Slice]:
    facts = read_facts(text, limits)
    kept = bound.window(limits, facts)
    return text[kept.start : kept.end], bound.measure(kept, len(text), len(facts.line_lengths))


def assert_equals_whole(result: BoundedResult, text: bytes, limits: OutputLimits) -> None:
    window, counts = whole_result(text, limits)
    assert result.text == window
    assert (result.bytes_kept, result.bytes_dropped, result.lines_kept, result.lines_dropped) == (
        counts.bytes_kept,
        counts.bytes_dropped,
        counts.lines_kept,
        counts.lines_dropped,
    )


def big_pieces() -> st.SearchStrategy[bytes]:
    """Texts with long runs, so tails skip the front of big writes and heads fill and skip."""
    run = st.tuples(st.sampled_from([b"a", b"\n", b"\xe2\x82\xac", b"\xff", b"xy\n"]), st.integers(1, 120))
    return st.lists(run, max_size=12).map(lambda runs: b"".join(piece * count for piece, count in runs))


@given(limits_st, chunked(st.one_of(texts, big_pieces())))
def test_snapshots_with_skips_across_chunkings_equal_bounding_the_whole_stream(
    limits: OutputLimits, chunks: list[bytes]
) -> None:
    output = BoundedOutput(On(limits))
    written = b""
    for chunk in chunks:
        output.write(chunk)
        written += chunk
        assert_equals_whole(output.snapshot(), written, limits)
        assert len(output._store) <= 2 * bound.margin(limits)  # O(limit) however long the stream
    result = output.close()
    assert_equals_whole(result, written, limits)
    assert result.bytes_kept + result.bytes_dropped == output.bytes_written == len(written)


def test_snapshots_equal_bounding_the_whole_stream_for_a_character_at_every_offset() -> None:
    emoji = "\N{GRINNING FACE}".encode()
    for keep, max_bytes in itertools.product(Keep, range(1, 6)):
        limits = OutputLimits(max_bytes, 2, keep)
        for before in range(12):
            text = b"a" * before + emoji + b"b" * 5
            for size in (1, 2, 3, 5, 8, len(text)):
                output = BoundedOutput(On(limits))
                for start in range(0, len(text), size):
                    output.write(text[start : start + size])
                assert_equals_whole(output.close(), text, limits)


@given(st.binary(max_size=40), st.integers(0, 41))
def test_char_boundaries_match_a_greedy_decoder(line: bytes, position: int) -> None:
    position = min(position, len(line))
    assert is_boundary(line, position) == (position in reference_boundaries(line))


def test_char_boundaries_match_a_greedy_decoder_small_scope() -> None:
    alphabet = [0x61, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0xED, 0xA0, 0xFF, 0x80]
    for length in range(5):
        for combo in itertools.product(alphabet, repeat=length):
            line = bytes(combo)
            expected = reference_boundaries(line)
            assert [p for p in range(len(line) + 1) if is_boundary(line, p)] == expected


@given(texts)
def test_line_lengths_are_the_spec_lines(text: bytes) -> None:
    assert line_lengths(text) == tuple(len(line) for line in reference_lines(text))


def test_past_the_limit_the_artifact_holds_the_full_output(tmp_path: Path) -> None:
    limits = OutputLimits(100, 10, Keep.TAIL)
    output = BoundedOutput(On(limits), tmp_path / "artifacts", artifact_prefix="run")
    full = b"".join(f"line {i} \xff\xfe\n".encode("latin-1") for i in range(1000))
    for start in range(0, len(full), 777):
        output.write(full[start : start + 777])
    result = output.close()
    assert result.artifact is not None and result.artifact.read_bytes() == full
    assert stat.S_IMODE(result.artifact.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "artifacts").stat().st_mode) == 0o700
    assert result.artifact.name.startswith("run-")
    assert result.notice is not None and str(result.artifact) in result.notice
    assert result.bytes_kept + result.bytes_dropped == len(full)
    assert result.lines_kept == 8 and result.lines_dropped == 992  # 8 lines of 12 bytes fit in 100
    assert full.endswith(result.text)


def test_within_the_limit_there_is_no_artifact_and_no_notice(tmp_path: Path) -> None:
    output = BoundedOutput(DEFAULT_TRUNCATION, tmp_path)
    output.write(b"hello\n")
    result = output.close()
    assert result == BoundedResult(b"hello\n", 6, 0, 1, 0, None, None)
    assert list(tmp_path.iterdir()) == []


def test_off_keeps_every_byte_and_makes_no_artifact(tmp_path: Path) -> None:
    output = BoundedOutput(Off(), tmp_path)
    data = os.urandom(300_000)
    for start in range(0, len(data), 4096):
        output.write(data[start : start + 4096])
    result = output.close()
    assert result.text == data and result.bytes_dropped == 0 and result.lines_dropped == 0
    assert result.notice is None and result.artifact is None
    assert list(tmp_path.iterdir()) == []


def test_a_head_keeps_the_first_lines_and_names_the_end_dropped(tmp_path: Path) -> None:
    output = BoundedOutput(On(OutputLimits(1000, 3, Keep.HEAD)), tmp_path)
    output.write(b"".join(b"%d\n" % i for i in range(100)))
    result = output.close()
    assert result.text == b"0\n1\n2\n"
    assert result.notice is not None and "dropped from the end" in result.notice


def test_an_artifact_that_cannot_be_made_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    output = BoundedOutput(On(OutputLimits(4, 1)), blocker / "artifacts")
    output.write(b"0123456789\n" * 3)
    result = output.close()
    assert result.artifact is None and result.artifact_error is not None
    assert result.notice is not None and "the full output was not saved" in result.notice


def test_writes_after_close_are_refused_and_close_is_idempotent() -> None:
    output = BoundedOutput(DEFAULT_TRUNCATION)
    output.write(b"x")
    first = output.close()
    assert output.close() is first
    with pytest.raises(ValueError):
        output.write(b"y")


def test_a_bad_truncation_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        BoundedOutput("50k")  # type: ignore[arg-type]


def test_the_record_replaces_invalid_utf8_keeps_the_exact_bytes_and_names_every_key() -> None:
    result = BoundedResult(b"ok \xff\n", 5, 0, 1, 0, None, None)
    assert result.to_record().to_json() == {
        "text": "ok \ufffd\n",
        "bytes_kept": 5,
        "bytes_dropped": 0,
        "lines_kept": 1,
        "lines_dropped": 0,
        "notice": None,
        "artifact": None,
        "artifact_error": None,
        "text_base64": "b2sg/wo=",
        "artifact_bytes_dropped": 0,
    }
    assert BoundedResult(b"ok\n", 3, 0, 1, 0, None, None).to_record().text_base64 is None


# ---- spill: a job's output reaches its file from the first byte --------------------------------------------------


def spill_files(directory: Path, prefix: str = "job-1") -> list[Path]:
    """The spill files of `prefix` (named as `durable_output` looks them up)."""
    return sorted(directory.glob(f"{prefix}-*")) if directory.is_dir() else []


@given(limits_st, chunked(st.one_of(texts, big_pieces())))
def test_a_spill_holds_every_byte_while_running_and_bounds_as_without_one(
    limits: OutputLimits, chunks: list[bytes]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "artifacts"
        spilled = BoundedOutput(On(limits), directory, artifact_prefix="job-1", spill=True)
        plain = BoundedOutput(On(limits))
        written = b""
        for chunk in chunks:
            spilled.write(chunk)
            plain.write(chunk)
            written += chunk
            files = spill_files(directory)
            assert [path.read_bytes() for path in files] == ([written] if written else [])
            window, expected = spilled.snapshot(), plain.snapshot()
            assert window.text == expected.text and window.truncated == expected.truncated
            assert window.artifact == (files[0] if window.truncated else None)
        result, expected = spilled.close(), plain.close()
        assert (result.text, result.bytes_kept, result.bytes_dropped, result.lines_kept, result.lines_dropped) == (
            expected.text,
            expected.bytes_kept,
            expected.bytes_dropped,
            expected.lines_kept,
            expected.lines_dropped,
        )
        if result.truncated:
            assert spill_files(directory) == [result.artifact]
            assert result.artifact is not None and result.artifact.read_bytes() == written
        else:
            assert result.artifact is None and spill_files(directory) == []


def test_a_spill_exists_from_the_first_byte_with_mode_0600_and_goes_at_a_close_within_the_limits(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "artifacts"
    output = BoundedOutput(DEFAULT_TRUNCATION, directory, artifact_prefix="job-1", spill=True)
    output.write(b"")
    assert spill_files(directory) == []  # no byte yet: no file
    output.write(b"s")
    (path,) = spill_files(directory)
    assert path.read_bytes() == b"s"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    output.write(b"tarted\n")
    assert path.read_bytes() == b"started\n"
    assert output.snapshot() == BoundedResult(b"started\n", 8, 0, 1, 0, None, None)
    assert output.close() == BoundedResult(b"started\n", 8, 0, 1, 0, None, None)
    assert not path.exists() and list(directory.iterdir()) == []


def test_past_the_limits_the_spill_is_the_artifact_not_a_copy(tmp_path: Path) -> None:
    limits = OutputLimits(100, 10, Keep.TAIL)
    output = BoundedOutput(On(limits), tmp_path, artifact_prefix="job-1", spill=True)
    output.write(b"first\n")
    (path,) = spill_files(tmp_path)
    inode = path.stat().st_ino
    full = b"first\n" + b"".join(b"line %d\n" % i for i in range(1000))
    output.write(full[6:])
    running = output.snapshot()
    assert running.artifact == path and running.notice is not None and str(path) in running.notice
    result = output.close()
    assert result.artifact == path and path.stat().st_ino == inode and path.read_bytes() == full
    assert spill_files(tmp_path) == [path]
    assert result.bytes_kept + result.bytes_dropped == len(full)


def test_under_off_a_spill_holds_every_byte_and_goes_at_close(tmp_path: Path) -> None:
    output = BoundedOutput(Off(), tmp_path, artifact_prefix="job-1", spill=True)
    data = os.urandom(300_000)
    for start in range(0, len(data), 4096):
        output.write(data[start : start + 4096])
        (path,) = spill_files(tmp_path)
        assert path.read_bytes() == data[: start + 4096]
    result = output.close()
    assert result.text == data and result.bytes_dropped == 0 and result.artifact is None and result.notice is None
    assert list(tmp_path.iterdir()) == []


def test_a_spill_without_an_artifact_dir_is_no_file() -> None:
    output = BoundedOutput(DEFAULT_TRUNCATION, None, artifact_prefix="job-1", spill=True)
    output.write(b"hello\n")
    assert output.close() == BoundedResult(b"hello\n", 6, 0, 1, 0, None, None)


@pytest.mark.parametrize("past_the_limits", [False, True])
def test_a_spill_that_cannot_be_written_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, past_the_limits: bool
) -> None:
    def full_disk(fd: int, data: bytes | bytearray | memoryview) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    output = BoundedOutput(On(OutputLimits(50, 5)), tmp_path, artifact_prefix="job-1", spill=True)
    output.write(b"before\n")
    monkeypatch.setattr("eukhe.output.write_all", full_disk)
    output.write(b"after\n" * (20 if past_the_limits else 1))
    running = output.snapshot()
    assert running.artifact_error is not None and "No space left on device" in running.artifact_error
    result = output.close()
    assert result.artifact_error == running.artifact_error
    if past_the_limits:
        assert result.notice is not None and "the full output was not saved" in result.notice
    else:
        assert result.text == b"before\nafter\n" and result.notice is None and result.artifact is None
        assert spill_files(tmp_path) == []  # a spill within the limits goes at close, written or not
