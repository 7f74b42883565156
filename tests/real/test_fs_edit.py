"""`fs.edit` on real files: a multi-file patch applies completely or not at all, also when a commit step fails."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from eukhe.fs import EditArgs, EditChange, FsError, Reason, edit
from eukhe.fs.commit import ORIGINAL_TAG, TEMP_TAG
from eukhe.fs.context import sibling
from tests.real.fs_support import local, make_tree, refused, snapshot

pytestmark = pytest.mark.real


def patch(*lines: str) -> EditArgs:
    return EditArgs(patch="\n".join(["*** Begin Patch", *lines, "*** End Patch"]) + "\n")


def test_edit_adds_updates_deletes_and_moves(tmp_path: Path) -> None:
    make_tree(tmp_path, {"src/app.py": "def main():\n    run()\n", "old.txt": "bye\n", "notes.md": "a\nb\nc\n"})
    (tmp_path / "src/app.py").chmod(0o751)
    answer = edit(
        local(tmp_path),
        patch(
            "*** Add File: docs/new.md",
            "+# New",
            "+",
            "*** Delete File: old.txt",
            "*** Update File: src/app.py",
            "*** Move to: src/cli/main.py",
            "@@ def main():",
            "-    run()",
            "+    run(fast=True)",
            "*** Update File: notes.md",
            " b",
            "-c",
            "+C",
            "*** End of File",
        ),
    )
    root = str(tmp_path)
    assert answer.changes == (
        EditChange(action="added", path=f"{root}/docs/new.md"),
        EditChange(action="deleted", path=f"{root}/old.txt"),
        EditChange(action="moved", path=f"{root}/src/app.py", destination=f"{root}/src/cli/main.py"),
        EditChange(action="updated", path=f"{root}/notes.md"),
    )
    assert (tmp_path / "docs/new.md").read_text() == "# New\n\n"
    assert not (tmp_path / "old.txt").exists() and not (tmp_path / "src/app.py").exists()
    assert (tmp_path / "src/cli/main.py").read_text() == "def main():\n    run(fast=True)\n"
    assert stat.S_IMODE((tmp_path / "src/cli/main.py").stat().st_mode) == 0o751  # a moved file keeps its mode
    assert (tmp_path / "notes.md").read_text() == "a\nb\nC\n"
    assert not [name for _, _, files in os.walk(tmp_path) for name in files if name.endswith((TEMP_TAG, ORIGINAL_TAG))]


def test_edit_keeps_line_endings_and_the_missing_final_newline(tmp_path: Path) -> None:
    make_tree(tmp_path, {"crlf.txt": "a\r\nb\r\n", "open.txt": "a\nb"})
    edit(
        local(tmp_path),
        patch("*** Update File: crlf.txt", "-b", "+B", "*** Update File: open.txt", " a", "-b", "+B", "+c"),
    )
    assert (tmp_path / "crlf.txt").read_bytes() == b"a\r\nB\r\n"
    assert (tmp_path / "open.txt").read_bytes() == b"a\nB\nc"


def test_edit_sections_see_the_ones_before(tmp_path: Path) -> None:
    answer = edit(
        local(tmp_path),
        patch(
            "*** Add File: f",
            "+one",
            "*** Update File: f",
            "@@",
            " one",
            "+two",
            "*** Delete File: f",
            "*** Add File: f",
            "+three",
        ),
    )
    assert [change.action for change in answer.changes] == ["added", "updated", "deleted", "added"]
    assert (tmp_path / "f").read_text() == "three\n"


def test_edit_through_a_symlink_updates_its_target(tmp_path: Path) -> None:
    make_tree(tmp_path, {"real.txt": "x\n"})
    (tmp_path / "link.txt").symlink_to("real.txt")
    answer = edit(local(tmp_path), patch("*** Update File: link.txt", "-x", "+y"))
    assert answer.changes == (EditChange(action="updated", path=str(tmp_path / "real.txt")),)
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "y\n"


@pytest.mark.parametrize(
    ("lines", "path", "words"),
    [
        (("*** Update File: a.txt", "x"), None, "patch line 3: expected"),
        (("*** Update File: a.txt", "-not there", "+y"), "a.txt", "section 1 (A): hunk 1: its 1 old line(s)"),
        (("*** Update File: a.txt", "@@ nowhere", "+y"), "a.txt", "context line 'nowhere' not found"),
        (("*** Update File: missing.txt", "+y"), "missing.txt", "cannot update: the path does not exist"),
        (("*** Delete File: missing.txt",), "missing.txt", "cannot delete: the path does not exist"),
        (("*** Delete File: d",), "d", "cannot delete: the path is a directory"),
        (("*** Add File: a.txt", "+y"), "a.txt", "cannot add: a file already exists there"),
        (("*** Update File: a.txt", "*** Move to: b.txt"), "a.txt", "cannot move to B: something exists there"),
        (("*** Add File: a.txt/x", "+y"), "a.txt/x", "is not a directory"),
    ],
)
def test_edit_refusals_name_the_path_and_change_nothing(
    tmp_path: Path, lines: tuple[str, ...], path: str | None, words: str
) -> None:
    make_tree(tmp_path, {"a.txt": "a\n", "b.txt": "b\n", "d": None})
    before = snapshot(tmp_path)
    reason = Reason.NOT_A_DIRECTORY if path == "a.txt/x" else Reason.PATCH_FAILED
    error = refused(lambda: edit(local(tmp_path), patch(*lines)), reason)
    expected = None if path is None else str(tmp_path / path)
    if path == "a.txt/x":
        expected = path  # refused while checking the path: the argument as given
    assert error.path == expected
    assert words.replace("(A)", f"({tmp_path}/a.txt)").replace(" B:", f" {tmp_path}/b.txt:") in error.message
    assert snapshot(tmp_path) == before


def test_edit_whose_third_section_fails_leaves_the_first_two_files_untouched(tmp_path: Path) -> None:
    make_tree(tmp_path, {"one.txt": "1\n", "three.txt": "3\n"})
    before = snapshot(tmp_path)
    error = refused(
        lambda: edit(
            local(tmp_path),
            patch(
                "*** Update File: one.txt",
                "-1",
                "+one",
                "*** Add File: two.txt",
                "+two",
                "*** Update File: three.txt",
                "-three",
                "+3",
            ),
        ),
        Reason.PATCH_FAILED,
    )
    assert error.path == str(tmp_path / "three.txt") and error.message.startswith("section 3 ")
    assert snapshot(tmp_path) == before


def rollback_patch() -> EditArgs:
    return patch(
        "*** Update File: a.txt",
        "-a",
        "+A",
        "*** Add File: new/dir/b.txt",
        "+b",
        "*** Update File: c.txt",
        "*** Move to: moved/c.txt",
        "-c",
        "+C",
        "*** Delete File: d.txt",
    )


@pytest.mark.parametrize("failing", [0, 1, 2, 3, 4])
def test_edit_rolls_back_what_it_renamed_when_a_commit_step_fails(tmp_path: Path, failing: int) -> None:
    """A real failure at commit step `failing` (another process removes the prepared file of a write, or puts a
    directory where a removal sets its file aside): the steps before are undone, and the tree is as it was."""
    make_tree(tmp_path, {"a.txt": "a\n", "c.txt": "c\n", "d.txt": "d\n"})
    (tmp_path / "a.txt").chmod(0o700)
    inode = (tmp_path / "a.txt").stat().st_ino
    before = snapshot(tmp_path)
    steps: list[str] = []

    def interfere(step: int, target: str) -> None:
        steps.append(os.path.relpath(target, tmp_path))
        if step == failing:
            temp = sibling(target, TEMP_TAG)
            if os.path.exists(temp):
                os.unlink(temp)
            else:
                os.makedirs(sibling(target, ORIGINAL_TAG) + "/blocker")

    with pytest.raises(FsError) as caught:
        edit(local(tmp_path), rollback_patch(), before_step=interfere)
    for blocker in tmp_path.glob(f"*.{ORIGINAL_TAG}/blocker"):
        blocker.rmdir()
        blocker.parent.rmdir()
    assert caught.value.reason is Reason.PATCH_FAILED
    assert caught.value.message.endswith("nothing was changed")
    assert steps == ["a.txt", "new/dir/b.txt", "moved/c.txt", "c.txt", "d.txt"][: failing + 1]
    assert snapshot(tmp_path) == before  # also: no temporary or original copy left, no directory made
    assert (tmp_path / "a.txt").stat().st_ino == inode  # the original file itself is back


FULL_DISK_EDIT = r"""
import json, resource, signal, sys
from pathlib import Path
from eukhe.fs import EditArgs, FsContext, FsError, edit

root, patch, limit = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
try:
    edit(FsContext(root), EditArgs(patch=patch))
except FsError as error:
    print(json.dumps({"reason": error.reason.value, "path": error.path, "message": error.message}))
else:
    sys.exit("the edit past the file size limit did not fail")
"""


def test_edit_whose_second_temporary_write_fails_leaves_no_temporary_and_no_new_directory(tmp_path: Path) -> None:
    """The prepare phase fails for real on its second write (a disk that is full for this process: RLIMIT_FSIZE,
    which holds for root too): the first write's temporary, the failed one and the directories made for it go."""
    limit = 1000
    make_tree(tmp_path, {"a.txt": "a\n", "d/keep.txt": "k\n"})
    before = snapshot(tmp_path)
    args = patch(
        "*** Update File: a.txt",
        "-a",
        "+A",
        "*** Add File: d/new/deeper/big.txt",
        "+" + "b" * (2 * limit),
    )
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_EDIT, str(tmp_path), args.patch, str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    error = json.loads(done.stdout)
    assert error["reason"] == Reason.PATCH_FAILED.value
    assert error["path"] == str(tmp_path / "d/new/deeper/big.txt")
    assert error["message"].endswith("nothing was changed"), error["message"]
    assert snapshot(tmp_path) == before  # also: no temporary left, no directory made


def test_edit_replaces_what_a_crash_left_beside_its_targets(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.txt": "a\n"})
    Path(sibling(str(tmp_path / "a.txt"), TEMP_TAG)).write_text("half written")
    Path(sibling(str(tmp_path / "a.txt"), ORIGINAL_TAG)).write_text("an old original")
    edit(local(tmp_path), patch("*** Update File: a.txt", "-a", "+A"))
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]
    assert (tmp_path / "a.txt").read_text() == "A\n"


def test_edit_of_a_long_name_uses_a_hashed_temporary_name(tmp_path: Path) -> None:
    name = "n" * 250
    make_tree(tmp_path, {name: "x\n"})
    edit(local(tmp_path), patch(f"*** Update File: {name}", "-x", "+y"))
    assert (tmp_path / name).read_text() == "y\n" and os.listdir(tmp_path) == [name]
