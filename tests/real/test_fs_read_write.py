"""`fs.read` and `fs.write` on real files: lines, offsets, the bound with its notice and artifact, atomic writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eukhe.core.bound import DEFAULT_MAX_BYTES, Off
from eukhe.fs import ReadArgs, Reason, WriteArgs, read, write
from eukhe.fs.reading import CHUNK
from tests.real.fs_support import local, make_tree, refused, small_limits

pytestmark = pytest.mark.real


def test_read_answers_lines_with_their_counts(tmp_path: Path) -> None:
    make_tree(tmp_path, {"f.txt": "one\ntwo\nthree\nfour"})
    context = local(tmp_path)
    whole = read(context, ReadArgs(path="f.txt"))
    assert (whole.output.text, whole.offset, whole.lines, whole.total_lines) == ("one\ntwo\nthree\nfour", 1, 4, 4)
    assert whole.absolute == str(tmp_path / "f.txt") and whole.output.notice is None and whole.output.artifact is None
    middle = read(context, ReadArgs(path="f.txt", offset=2, limit=2))
    assert (middle.output.text, middle.offset, middle.lines, middle.total_lines) == ("two\nthree\n", 2, 2, 4)
    past = read(context, ReadArgs(path="f.txt", offset=9))
    assert (past.output.text, past.lines, past.total_lines) == ("", 0, 4)
    none = read(context, ReadArgs(path=str(tmp_path / "f.txt"), limit=0))
    assert (none.output.text, none.lines) == ("", 0)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from([b"a", b"\n", b"bc\n", b"\xff", b"\r", b"\x0c"]), max_size=30).map(b"".join),
    st.integers(1, 12),
    st.none() | st.integers(0, 12),
)
def test_read_equals_slicing_the_lines(tmp_path: Path, data: bytes, offset: int, limit: int | None) -> None:
    (tmp_path / "f").write_bytes(data)
    answer = read(local(tmp_path, Off()), ReadArgs(path="f", offset=offset, limit=limit))
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    wanted = lines[offset - 1 : None if limit is None else offset - 1 + limit]
    assert answer.output.text == b"".join(wanted).decode("utf-8", errors="replace")
    assert (answer.lines, answer.total_lines) == (len(wanted), len(lines))


def test_read_crosses_chunk_boundaries(tmp_path: Path) -> None:
    line = b"x" * 99 + b"\n"
    data = line * (3 * CHUNK // len(line) + 7)
    (tmp_path / "big").write_bytes(data)
    total = len(data) // len(line)
    answer = read(local(tmp_path, Off()), ReadArgs(path="big", offset=total - 2, limit=5))
    assert (answer.output.text, answer.lines, answer.total_lines) == ((line * 3).decode(), 3, total)
    at_seam = CHUNK // len(line)
    answer = read(local(tmp_path, Off()), ReadArgs(path="big", offset=at_seam, limit=3))
    assert answer.output.text == (line * 3).decode()


def test_read_of_a_1_mib_file_is_bounded_with_the_notice_and_the_artifact(tmp_path: Path) -> None:
    data = b"".join(b"line %06d of a long file\n" % n for n in range((1 << 20) // 26 + 1))[: 1 << 20]
    (tmp_path / "big.txt").write_bytes(data)
    artifacts = tmp_path / "artifacts"
    answer = read(local(tmp_path, artifacts=artifacts), ReadArgs(path="big.txt"))
    assert (
        answer.output.bytes_kept <= DEFAULT_MAX_BYTES
        and answer.output.bytes_kept + answer.output.bytes_dropped == len(data)
    )
    assert data.decode().startswith(answer.output.text)  # the head: a file reads from its start
    assert answer.output.lines_kept + answer.output.lines_dropped == answer.total_lines == answer.lines
    assert answer.output.artifact is not None and Path(answer.output.artifact).read_bytes() == data
    out = answer.output
    assert out.notice == (
        f"[output truncated: {out.bytes_dropped} bytes ({out.lines_dropped} lines) dropped from the end; "
        f"kept the first {out.bytes_kept} bytes ({out.lines_kept} lines); full output: {out.artifact}]"
    )
    assert stat.S_IMODE(os.stat(answer.output.artifact).st_mode) == 0o600
    small = read(local(tmp_path, small_limits(100, 3), artifacts), ReadArgs(path="big.txt", offset=10, limit=5))
    assert small.output.text == "line 000009 of a long file\nline 000010 of a long file\nline 000011 of a long file\n"
    assert small.lines == 5 and small.output.lines_dropped == 2 and small.output.notice is not None


def test_read_refusals(tmp_path: Path) -> None:
    make_tree(tmp_path, {"f": "x\n", "d": None})
    os.mkfifo(tmp_path / "fifo")
    context = local(tmp_path)
    refused(lambda: read(context, ReadArgs(path="missing")), Reason.NOT_FOUND)
    refused(lambda: read(context, ReadArgs(path="d")), Reason.NOT_A_FILE)
    refused(lambda: read(context, ReadArgs(path="fifo")), Reason.NOT_A_FILE)
    refused(lambda: read(context, ReadArgs(path="f/x")), Reason.NOT_A_DIRECTORY)
    refused(lambda: read(context, ReadArgs(path="f", offset=0)), Reason.BAD_REQUEST)
    refused(lambda: read(context, ReadArgs(path="f", limit=-1)), Reason.BAD_REQUEST)


def test_write_creates_and_replaces_atomically_keeping_modes(tmp_path: Path) -> None:
    context = local(tmp_path)
    old_umask = os.umask(0o027)
    try:
        created = write(context, WriteArgs(path="new/dir/f.txt", content="héllo\n"))
    finally:
        os.umask(old_umask)
    target = tmp_path / "new/dir/f.txt"
    assert (created.absolute, created.bytes_written, created.created) == (str(target), 7, True)
    assert target.read_text() == "héllo\n"
    # The user's files keep the umask: 0666 and 0777 less 027.
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == stat.S_IMODE((tmp_path / "new/dir").stat().st_mode)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o750
    target.chmod(0o755)
    inode = target.stat().st_ino
    replaced = write(context, WriteArgs(path=str(target), content=""))
    assert (replaced.bytes_written, replaced.created) == (0, False)
    assert target.read_bytes() == b"" and stat.S_IMODE(target.stat().st_mode) == 0o755
    assert target.stat().st_ino != inode  # a rename put a new file in place, never a partial write
    assert sorted(os.listdir(target.parent)) == ["f.txt"]  # no temporary file left


def test_write_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    make_tree(tmp_path, {"real.txt": "old\n"})
    (tmp_path / "link.txt").symlink_to("real.txt")
    answer = write(local(tmp_path), WriteArgs(path="link.txt", content="new\n"))
    assert answer.absolute == str(tmp_path / "real.txt")
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "new\n"


def test_write_refusals(tmp_path: Path) -> None:
    make_tree(tmp_path, {"f": "x\n", "d": None})
    os.mkfifo(tmp_path / "fifo")
    context = local(tmp_path)
    refused(lambda: write(context, WriteArgs(path="d", content="")), Reason.IS_A_DIRECTORY)
    refused(lambda: write(context, WriteArgs(path="fifo", content="")), Reason.NOT_A_FILE)
    refused(lambda: write(context, WriteArgs(path="f/x", content="")), Reason.NOT_A_DIRECTORY)
    refused(lambda: write(context, WriteArgs(path="", content="")), Reason.INVALID_PATH)
    refused(lambda: write(context, WriteArgs(path="a\0b", content="")), Reason.INVALID_PATH)
    refused(lambda: write(context, WriteArgs(path="x", content="\ud800")), Reason.BAD_REQUEST)
    assert sorted(os.listdir(tmp_path)) == ["d", "f", "fifo"]


def test_write_and_read_carry_bytes_that_are_not_utf8_as_escapes(tmp_path: Path) -> None:
    context = local(tmp_path)
    write(context, WriteArgs(path="raw", content=b"caf\xe9\n".decode("utf-8", errors="surrogateescape")))
    assert (tmp_path / "raw").read_bytes() == b"caf\xe9\n"
    assert read(context, ReadArgs(path="raw")).output.text == "caf\ufffd\n"
