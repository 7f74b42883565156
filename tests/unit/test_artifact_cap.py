"""An artifact's cap in BoundedOutput (docs/output.md, "The artifact's cap"), on real files: past the cap the file
keeps the output's head and tail with the exact marker between them, never grows past the cap while written, reads
as head then the latest bytes if its writer stops, and the notice and the record say the artifact is partial; the
window and its counts are the same with and without a cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eukhe import output as shell
from eukhe.core import artifact as core
from eukhe.core.artifact import MIN_CAP, ArtifactFactError
from eukhe.core.bound import Keep, On, OutputLimits
from eukhe.output import BoundedOutput
from tests.laws.artifact_support import check_closed

LIMITS = On(OutputLimits(1000, 50))
FLOOD = b"".join(b"line %d \xc3\xa9\n" % index + b"x" * (index % 13) for index in range(3000))


def streamed(
    tmp_path: Path, data: bytes, chunks: list[int], cap: int, *, spill: bool, keep: Keep = Keep.TAIL
) -> tuple[BoundedOutput, list[int]]:
    """`data` written in `chunks` (then the rest); the artifact file's size after every write."""
    output = BoundedOutput(
        On(OutputLimits(1000, 50, keep)), tmp_path, spill=spill, artifact_max_bytes=cap, artifact_prefix="capped"
    )
    sizes: list[int] = []
    position = 0
    for size in [*chunks, len(data)]:
        output.write(data[position : position + size])
        position = min(len(data), position + size)
        found = list(tmp_path.glob("capped-*"))
        if found:
            sizes.append(found[0].stat().st_size)
        if position == len(data):
            break
    return output, sizes


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cap=st.sampled_from([MIN_CAP, 5000, 9999, 0]),
    length=st.integers(0, len(FLOOD)),
    chunks=st.lists(st.integers(1, 12_000), max_size=8),
    spill=st.booleans(),
    keep=st.sampled_from(list(Keep)),
)
def test_a_capped_artifact_keeps_head_marker_tail_and_never_passes_the_cap(
    tmp_path: Path, *, cap: int, length: int, chunks: list[int], spill: bool, keep: Keep
) -> None:
    directory = tmp_path / os.urandom(4).hex()
    data = FLOOD[:length]
    output, sizes = streamed(directory, data, chunks, cap, spill=spill, keep=keep)
    result = output.close()
    uncapped, _ = streamed(directory / "whole", data, chunks, 0, spill=spill, keep=keep)
    whole = uncapped.close()
    assert (result.text, result.bytes_kept, result.bytes_dropped, result.lines_kept, result.lines_dropped) == (
        whole.text,
        whole.bytes_kept,
        whole.bytes_dropped,
        whole.lines_kept,
        whole.lines_dropped,
    ), "the window and its counts do not depend on the cap"
    if cap:
        assert all(size <= cap for size in sizes)
    if result.artifact is None:
        assert not result.truncated and result.artifact_bytes_dropped == 0
        return
    assert whole.artifact is not None and whole.artifact.read_bytes() == data
    check_closed(data, cap, result.artifact.read_bytes())
    dropped = core.kept(core.shape_of(cap), len(data)).dropped
    assert result.artifact_bytes_dropped == dropped
    assert result.to_record().artifact_bytes_dropped == dropped
    assert result.notice is not None
    if dropped:
        assert f"the output's head and tail, {dropped} bytes between them left out: {result.artifact}]" in result.notice
    else:
        assert result.notice.endswith(f"full output: {result.artifact}]")


def test_a_writer_that_stops_leaves_the_head_then_the_latest_bytes(tmp_path: Path) -> None:
    """What a reopen after a crash reads: the output's head, the provisional marker, then its latest bytes in order,
    at any point of the stream."""
    shape = core.Shape(MIN_CAP)
    output = BoundedOutput(LIMITS, tmp_path, spill=True, artifact_max_bytes=MIN_CAP)
    for end in range(0, len(FLOOD), 997):
        output.write(FLOOD[end : end + 997])
        written = min(len(FLOOD), end + 997)
        (path,) = tmp_path.iterdir()
        body = path.read_bytes()
        assert len(body) <= MIN_CAP
        if written <= MIN_CAP:
            assert body == FLOOD[:written]
            continue
        assert body[: shape.head] == FLOOD[: shape.head]
        assert body[shape.head : shape.area_start] == core.provisional_marker(FLOOD[shape.head - 1] == 0x0A)
        latest = body[shape.area_start :]
        assert len(latest) >= shape.tail
        assert latest == FLOOD[written - len(latest) : written]
        snapshot = output.snapshot()
        assert snapshot.artifact_bytes_dropped == written - shape.head - len(latest)
    output.close()


def test_the_process_cap_is_the_default_of_every_output(tmp_path: Path) -> None:
    before = shell.artifact_max_bytes()
    try:
        shell.set_artifact_max_bytes(MIN_CAP)
        output = BoundedOutput(LIMITS, tmp_path)
        output.write(FLOOD)
        result = output.close()
        assert result.artifact is not None
        check_closed(FLOOD, MIN_CAP, result.artifact.read_bytes())
        shell.set_artifact_max_bytes(0)
        output = BoundedOutput(LIMITS, tmp_path)
        output.write(FLOOD)
        result = output.close()
        assert result.artifact is not None and result.artifact.read_bytes() == FLOOD
        assert result.artifact_bytes_dropped == 0
        with pytest.raises(ArtifactFactError):
            shell.set_artifact_max_bytes(MIN_CAP - 1)
        assert shell.artifact_max_bytes() == 0
    finally:
        shell.set_artifact_max_bytes(before)


def test_a_move_within_a_file_goes_piece_by_piece_when_it_must(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The moves copy exactly, in the kernel and through pread/pwrite, across pieces (a piece of 7 bytes here)."""
    monkeypatch.setattr(shell, "COPY_PIECE", 7)
    path = tmp_path / "f"
    data = bytes(range(200))
    for mover, move in ((shell._move_apart, core.Move(120, 10, 80)), (shell._move_forward, core.Move(50, 20, 150))):
        path.write_bytes(data)
        reader = os.open(path, os.O_RDONLY)
        writer = os.open(path, os.O_WRONLY)
        try:
            mover(reader, writer, move)
        finally:
            os.close(reader)
            os.close(writer)
        expected = bytearray(data)
        for offset in range(move.length):
            expected[move.target + offset] = expected[move.source + offset]
        assert path.read_bytes() == bytes(expected)
