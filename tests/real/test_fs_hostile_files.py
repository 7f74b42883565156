"""The file tools on files a hostile job can make in the workspace: a sparse file of terabytes (`fs read --limit 1`
and `fs grep` answer at once, reading none of its hole) and names that hold a newline (each listed as one quoted
line). Through the fs API the tools call and the CLI a person runs, with a real daemon.

A sparse file reads as zeros: a tool that read it all would run for hours; the suite's timeout is the only deadline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eukhe.core.pathquote import unquote_path
from eukhe.fs import GlobArgs, GrepArgs, ReadArgs, glob, grep, read
from tests.real.conftest import DaemonEnv
from tests.real.fs_support import ENGINES, local

pytestmark = pytest.mark.real

HOLE = 4 << 40
"""4 TiB of hole: reading it at 10 GB/s would take over seven minutes."""


def sparse(path: Path) -> Path:
    """`first\\n`, 4 TiB of hole, `last\\n` (the hole reads as NULs, so the file is binary to grep)."""
    with open(path, "wb") as file:
        file.write(b"first\n")
        file.seek(HOLE, os.SEEK_CUR)
        file.write(b"last\n")
    return path


def test_read_of_a_sparse_file_answers_its_first_line_and_counts_every_line(tmp_path: Path) -> None:
    sparse(tmp_path / "huge.bin")
    answer = read(local(tmp_path), ReadArgs(path="huge.bin", limit=1))
    assert answer.output.text == "first\n"
    assert answer.total_lines == 2  # the hole holds no newline: `last` ends the second line


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_of_a_sparse_file_skips_it_as_binary(tmp_path: Path, engine: str) -> None:
    sparse(tmp_path / "huge.bin")
    (tmp_path / "small.txt").write_text("first\n")
    named = grep(local(tmp_path), GrepArgs(pattern="nothing-matches", path="huge.bin"), "auto")
    assert named.matches == 0
    walked = grep(local(tmp_path), GrepArgs(pattern="first"), engine)  # type: ignore[arg-type]
    assert walked.output.text == "small.txt:1:first\n"


NAMES = ["a\nb.txt", "c\rd.txt", '"quoted.txt', "tab\there.txt", "plain.txt"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_name_holding_a_newline_is_one_quoted_line_in_glob_and_grep(tmp_path: Path, engine: str) -> None:
    for name in NAMES:
        (tmp_path / name).write_text("needle\n")
    listed = glob(local(tmp_path), GlobArgs(pattern="*")).output.text.splitlines()
    assert len(listed) == len(NAMES)
    assert sorted(unquote_path(line) for line in listed) == sorted(NAMES)
    assert '"a\\nb.txt"' in listed and "plain.txt" in listed
    found = grep(local(tmp_path), GrepArgs(pattern="needle"), engine).output.text.splitlines()  # type: ignore[arg-type]
    assert len(found) == len(NAMES)
    assert sorted(unquote_path(line.removesuffix(":1:needle")) for line in found) == sorted(NAMES)


def test_cli_fs_read_and_grep_of_a_sparse_file_answer(world: DaemonEnv, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    sparse(work / "huge.bin")
    session = world.json("session", "create", "--cwd", str(work), "--sandbox", "off")["id"]
    answer = world.json("fs", "read", "--session", session, "--limit", "1", str(work / "huge.bin"))
    assert answer["output"]["text"] == "first\n" and answer["total_lines"] == 2
    searched = world.json("fs", "grep", "--session", session, "first", str(work))
    assert searched["matches"] == 0  # the one file is binary
