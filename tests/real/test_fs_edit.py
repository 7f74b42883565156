"""`fs.edit` on real files: a multi-file patch applies completely or not at all, also when a commit step fails."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from eukhe.fs import EditArgs, EditChange, FsError, Reason, edit
from eukhe.fs.commit import ORIGINAL_TAG, TEMP_TAG
from eukhe.fs.context import sibling
from eukhe.records.cli import CliError
from eukhe.records.fs import EditAnswer
from tests.real.conftest import DaemonEnv
from tests.real.fs_support import local, make_tree, refused, snapshot, wrapped

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
        (("*** Update File: a.txt", "-not there", "+y"), "a.txt", "section 1 (<A>): hunk 1: its 1 old line(s)"),
        (("*** Update File: a.txt", "@@ nowhere", "+y"), "a.txt", "context line 'nowhere' not found"),
        (("*** Update File: missing.txt", "+y"), "missing.txt", "cannot update: the path does not exist"),
        (("*** Delete File: missing.txt",), "missing.txt", "cannot delete: the path does not exist"),
        (("*** Delete File: d",), "d", "cannot delete: the path is a directory"),
        (
            ("*** Add File: a.txt", "+y"),
            "a.txt",
            "cannot add: a file already exists there; to change it, use '*** Update File: <A>', or to replace it, put"
            " '*** Delete File: <A>' before this section",
        ),
        (("*** Add File: d", "+y"), "d", "cannot add: a directory already exists there"),
        (
            ("*** Update File: a.txt", "*** Move to: b.txt"),
            "a.txt",
            "cannot move to <B>: a file already exists there; to replace it, put '*** Delete File: <B>' before this"
            " section",
        ),
        (("*** Update File: a.txt", "*** Move to: d"), "a.txt", "cannot move to <D>: a directory already exists there"),
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
    for letter, name in {"A": "a.txt", "B": "b.txt", "D": "d"}.items():
        words = words.replace(f"<{letter}>", str(tmp_path / name))
    assert words in error.message
    assert snapshot(tmp_path) == before


def test_edit_takes_padded_markers_and_headers_as_models_write_them(tmp_path: Path) -> None:
    """Marker and header lines with whitespace around them are the markers; hunk lines keep their exact text."""
    make_tree(tmp_path, {"foo.txt": "keep\nold\n  indented\n", "gone.txt": "bye\n", "m.txt": "m\n"})
    text = (
        " *** Begin Patch\n"
        "  *** Update File: foo.txt\n"
        " keep\n"
        "-old\n"
        "+new\n"
        "   indented\n"
        " *** End of File\n"
        "\t*** Add File: added.txt \n"
        "+ *** End Patch\n"
        "  *** Delete File: gone.txt\n"
        " *** Update File: m.txt\n"
        "  *** Move to: moved.txt\t\n"
        " *** End Patch  \n"
    )
    answer = edit(local(tmp_path), EditArgs(patch=text))
    assert [(change.action, change.path, change.destination) for change in answer.changes] == [
        ("updated", str(tmp_path / "foo.txt"), None),
        ("added", str(tmp_path / "added.txt"), None),
        ("deleted", str(tmp_path / "gone.txt"), None),
        ("moved", str(tmp_path / "m.txt"), str(tmp_path / "moved.txt")),
    ]
    assert (tmp_path / "foo.txt").read_text() == "keep\nnew\n  indented\n"
    assert (tmp_path / "added.txt").read_text() == " *** End Patch\n"
    assert sorted(os.listdir(tmp_path)) == ["added.txt", "foo.txt", "moved.txt"]


def test_edit_refuses_an_empty_patch_as_changing_nothing(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.txt": "a\n"})
    before = snapshot(tmp_path)
    for text in ("*** Begin Patch\n*** End Patch\n", " *** Begin Patch\n\n  *** End Patch"):
        error = refused(lambda text=text: edit(local(tmp_path), EditArgs(patch=text)), Reason.PATCH_FAILED)
        assert error.path is None
        assert error.message.startswith("the patch changes nothing: patch line ")
        assert "expected a section header" in error.message
    assert snapshot(tmp_path) == before


def test_edit_refusals_name_the_path_as_the_kernel_sees_it(tmp_path: Path) -> None:
    """Through a path map, the advice of a refusal names sandbox paths, never the host's."""
    host = make_tree(tmp_path / "host", {"a.txt": "a\n", "b.txt": "b\n"})
    context = wrapped(host, {"/work": host}, sandbox_cwd="/work")
    add = refused(lambda: edit(context, patch("*** Add File: a.txt", "+y")), Reason.PATCH_FAILED)
    assert add.path == "/work/a.txt"
    assert add.message == (
        "section 1 (/work/a.txt): cannot add: a file already exists there; to change it, use"
        " '*** Update File: /work/a.txt', or to replace it, put '*** Delete File: /work/a.txt' before this section"
    )
    move = refused(lambda: edit(context, patch("*** Update File: a.txt", "*** Move to: b.txt")), Reason.PATCH_FAILED)
    assert move.message == (
        "section 1 (/work/a.txt): cannot move to /work/b.txt: a file already exists there; to replace it, put"
        " '*** Delete File: /work/b.txt' before this section"
    )
    assert str(tmp_path) not in add.message + move.message


def test_edit_refusals_advice_applies(tmp_path: Path) -> None:
    """Delete then Add replaces a file; Delete the destination first and the Move goes through."""
    make_tree(tmp_path, {"a.txt": "a\n", "b.txt": "b\n"})
    edit(local(tmp_path), patch("*** Delete File: a.txt", "*** Add File: a.txt", "+A"))
    assert (tmp_path / "a.txt").read_text() == "A\n"
    edit(local(tmp_path), patch("*** Delete File: b.txt", "*** Update File: a.txt", "*** Move to: b.txt"))
    assert sorted(os.listdir(tmp_path)) == ["b.txt"] and (tmp_path / "b.txt").read_text() == "A\n"


def test_cli_fs_edit_takes_padded_markers_refuses_an_empty_patch_and_explains_its_refusals(world: DaemonEnv) -> None:
    project = world.root / "project"
    make_tree(project, {"a.txt": "one\n", "b.txt": "two\n"})
    session = world.json("session", "create", "--cwd", str(project))["id"]
    source = world.root / "p.patch"

    def edit_with(text: str) -> tuple[int, CliError]:
        source.write_text(text)
        code, error = world.json_error("fs", "edit", "--session", session, str(source))
        return code, msgspec.convert(error, CliError)

    source.write_text(" *** Begin Patch\n  *** Update File: a.txt\n-one\n+ONE\n *** End Patch\n")
    edited = msgspec.convert(world.json("fs", "edit", "--session", session, str(source)), EditAnswer)
    assert [(c.action, c.path) for c in edited.changes] == [("updated", str(project / "a.txt"))]
    assert (project / "a.txt").read_text() == "ONE\n"

    code, empty = edit_with("*** Begin Patch\n*** End Patch\n")
    assert code == 1 and empty.error == "fs_error"
    assert empty.details == {"reason": "patch_failed", "path": None, "version": "transport@1"}
    assert empty.message.startswith("the patch changes nothing: ")

    a, b = project / "a.txt", project / "b.txt"
    _, add = edit_with(f"*** Begin Patch\n*** Add File: {a}\n+x\n*** End Patch\n")
    assert add.details == {"reason": "patch_failed", "path": str(a), "version": "transport@1"}
    assert f"use '*** Update File: {a}', or to replace it, put '*** Delete File: {a}' before" in add.message
    _, move = edit_with(f"*** Begin Patch\n*** Update File: {a}\n*** Move to: {b}\n*** End Patch\n")
    assert f"cannot move to {b}: a file already exists there; to replace it, put '*** Delete File: {b}'" in (
        move.message
    )
    assert (a.read_text(), b.read_text()) == ("ONE\n", "two\n")


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
