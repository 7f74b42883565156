"""The hand-back on real disks (spec S3 "A subagent's workspace" 4-6): crashes at every rename point
(a real process killed with SIGKILL there), the leftover copy beside a path, conflicts the parent cannot hold,
change detection that stat data cannot fool, the record that ends it, and a failure that keeps the copy."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import psutil
import pytest

from eukhe.core.merge import Dir, File, Link, StatFacts, Tree, packed_stat
from eukhe.core.stat_plan import StatGroup
from eukhe.records.workspace import CopyRecord, HandbackReport
from eukhe.workspace import (
    HandbackError,
    WorkspaceLayout,
    create_workspace,
    facts,
    hand_back,
    helper,
    load_report,
    remove_retired,
    spawn,
)
from eukhe.workspace.helper import HelperProcess
from eukhe.workspace.layout import temp_beside
from tests.workspace_support import age, handback_leftovers, read_disk, reshape

pytestmark = pytest.mark.real

A, B, C = File("A"), File("B"), File("C")

# One scenario reaching every kind of step: removals, writes (a file, a symlink, a new nested directory, a file the
# child turned into a directory), conflicts (both changed; the child removed what the parent changed; a directory
# there; a file where a directory goes) and untouched paths.
BASE: Tree = {
    "keep": A,
    "edit": A,
    "gone": A,
    "conflict": A,
    "conflict_removed": A,
    "file2dir": A,
    "link": Link("x"),
    "sub/deep/f": A,
}
PARENT: Tree = {
    **BASE,
    "keep": B,  # the parent's own edit, which the child did not touch
    "conflict": B,
    "conflict_removed": B,
    "blocked_dir": Dir(),
    "blocked_under": A,
}
CHILD: Tree = {
    "keep": A,
    "edit": B,
    "conflict": C,
    "file2dir/inner": B,
    "link": Link("y"),
    "sub/deep/f": A,
    "new/nested/n": B,
    "blocked_dir": A,
    "blocked_under/f": B,
}


def set_up(
    root: Path, base: Tree = BASE, parent: Tree = PARENT, child: Tree = CHILD, *, old: bool = False
) -> WorkspaceLayout:
    """A parent's directory shaped as `base` (`old`: with times long past, so no file is racy), copied for a
    child; then the copy reshaped into `child` and the parent's directory into `parent`."""
    parent_dir = root / "parent"
    parent_dir.mkdir(parents=True)
    reshape(parent_dir, base)
    if old:
        age(parent_dir)
    layout = WorkspaceLayout.at(root / "workspaces", "session", "child")
    create_workspace(parent_dir, layout)
    reshape(layout.copy, child)
    reshape(parent_dir, parent)
    return layout


def outcome(root: Path, layout: WorkspaceLayout, report: HandbackReport) -> object:
    """Everything a hand-back leaves, with this run's root written as <root>."""
    text = json.dumps(
        {
            "parent": sorted(map(repr, read_disk(root / "parent")[0].items())),
            "parent_dirs": sorted(read_disk(root / "parent")[1]),
            "conflicts": sorted(map(repr, read_disk(layout.conflicts)[0].items())),
            "workspace": sorted(os.listdir(layout.dir)),
            "copy_is_link_to_parent": layout.copy.is_symlink() and os.readlink(layout.copy) == str(root / "parent"),
            "report": msgspec.to_builtins(report),
            "record": msgspec.to_builtins(load_report(layout)),
        }
    )
    return json.loads(text.replace(str(root), "<root>"))


DRIVER = """
import os, signal, sys
from pathlib import Path
from eukhe.workspace import WorkspaceLayout, hand_back
root, kill_at = Path(sys.argv[1]), sys.argv[2]
def hook(point):
    if point == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
hand_back(WorkspaceLayout.at(root / "workspaces", "session", "child"), hook=hook)
"""


def kill_hand_back_at(root: Path, point: str) -> None:
    """Run the hand-back in a real child process that is killed with SIGKILL at `point`."""
    done = subprocess.run([sys.executable, "-c", DRIVER, str(root), point], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, (point, done.returncode, done.stderr.decode())


def all_points(root: Path) -> list[str]:
    layout = set_up(root)
    points: list[str] = []
    hand_back(layout, hook=points.append)
    return points


def test_a_crash_at_every_rename_point_reruns_to_the_uninterrupted_result(tmp_path: Path) -> None:
    reference_root = tmp_path / "reference"
    points = all_points(reference_root)
    reference = outcome(
        reference_root, WorkspaceLayout.at(reference_root / "workspaces", "session", "child"), _report(reference_root)
    )
    assert points == [
        "remove:file2dir",
        "remove:gone",
        "take:edit",
        "take:file2dir/inner",
        "take:link",
        "take:new/nested/n",
        "conflict:blocked_dir",
        "conflict:blocked_under/f",
        "conflict:conflict",
        "record",
        "retire:base",
        "retire:copy",
        "link:copy",
    ]
    for index, point in enumerate(points):
        root = tmp_path / f"crash{index}"
        layout = set_up(root)
        kill_hand_back_at(root, point)
        report = hand_back(layout)
        assert outcome(root, layout, report) == reference, point
        assert not handback_leftovers(root), point
        assert not layout.base.exists() and not layout.copy_record.exists()


def _report(root: Path) -> HandbackReport:
    report = load_report(WorkspaceLayout.at(root / "workspaces", "session", "child"))
    assert report is not None
    return report


def test_a_hand_back_after_a_crash_removes_the_copy_the_crash_left_beside_a_path(tmp_path: Path) -> None:
    layout = set_up(tmp_path)
    parent = tmp_path / "parent"
    kill_hand_back_at(tmp_path, "take:edit")
    left = temp_beside(parent / "edit")
    assert left.name == ".edit.eukhe-handback"
    assert left.read_bytes() == b"B\n"  # the child's version, complete, waiting for its rename
    assert (parent / "edit").read_bytes() == b"A\n"  # the path itself is still the parent's
    report = hand_back(layout)
    assert not left.exists()
    assert (parent / "edit").read_bytes() == b"B\n"
    assert "edit" in report.paths_taken
    assert not handback_leftovers(tmp_path)


def test_a_rerun_removes_the_leftover_even_where_the_parent_changed_the_path_since(tmp_path: Path) -> None:
    """The crash left the child's version beside "edit"; then the parent edited "edit": the rerun plans a conflict
    there (no write beside it), and still removes what the crash left."""
    layout = set_up(tmp_path)
    parent = tmp_path / "parent"
    kill_hand_back_at(tmp_path, "take:edit")
    (parent / "edit").write_text("the parent's edit after the crash\n")
    report = hand_back(layout)
    assert ("edit", "both_changed") in [(c.path, c.reason) for c in report.conflicts]
    assert (parent / "edit").read_text() == "the parent's edit after the crash\n"
    assert not handback_leftovers(tmp_path)


def test_a_path_the_parent_holds_as_a_directory_or_under_a_file_is_a_conflict(tmp_path: Path) -> None:
    base: Tree = {"kept": A, "taken": A}
    parent: Tree = {"kept": A, "taken": A, "d": Dir(), "f": A, "s": Link("elsewhere")}
    child: Tree = {"kept": A, "taken": B, "d": B, "f/inside": B, "s/inside": C}
    layout = set_up(tmp_path, base, parent, child)
    parent_dir = tmp_path / "parent"
    (tmp_path / "elsewhere").mkdir()  # the symlink points at a real directory: it must not be written through
    report = hand_back(layout)
    assert [(c.path, c.reason) for c in report.conflicts] == [
        ("d", "parent_holds_directory"),
        ("f/inside", "parent_holds_file_above"),
        ("s/inside", "parent_holds_file_above"),
    ]
    assert (parent_dir / "d").is_dir() and not os.listdir(parent_dir / "d")  # the parent's entries stay
    assert (parent_dir / "f").read_bytes() == b"A\n"
    assert os.readlink(parent_dir / "s") == "elsewhere" and not os.listdir(tmp_path / "elsewhere")
    assert (layout.conflicts / "d").read_bytes() == b"B\n"  # the child's versions, under their own paths
    assert (layout.conflicts / "f" / "inside").read_bytes() == b"B\n"
    assert (layout.conflicts / "s" / "inside").read_bytes() == b"A\n"
    assert stat.S_IMODE(os.lstat(layout.conflicts / "s" / "inside").st_mode) == 0o755
    assert [c.child_version for c in report.conflicts] == [
        str(layout.conflicts / p) for p in ("d", "f/inside", "s/inside")
    ]
    assert report.paths_taken == ("taken",)  # and the hand-back went on with the next path
    assert (parent_dir / "taken").read_bytes() == b"B\n"


def test_the_workspace_after_the_hand_back_keeps_the_record_and_conflicts_and_links_the_parent(tmp_path: Path) -> None:
    layout = set_up(tmp_path)
    report = hand_back(layout)
    assert sorted(os.listdir(layout.dir)) == ["conflicts", "copy", "handback.json"]
    assert os.readlink(layout.copy) == str(tmp_path / "parent")
    assert stat.S_IMODE(os.lstat(layout.record).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(layout.conflicts).st_mode) == 0o700
    assert load_report(layout) == report
    assert msgspec.json.decode(layout.record.read_bytes())["status"] == "done"


def test_the_retired_trees_can_be_removed_later(tmp_path: Path) -> None:
    layout = set_up(tmp_path)
    report = hand_back(layout, remove_now=False)
    assert layout.copy.is_symlink() and not layout.base.exists()
    assert layout.retired_base.is_dir() and layout.retired_copy.is_dir()
    remove_retired(layout)
    assert sorted(os.listdir(layout.dir)) == ["conflicts", "copy", "handback.json"]
    assert hand_back(layout) == report


def test_a_repeat_after_the_record_returns_it_and_changes_nothing(tmp_path: Path) -> None:
    layout = set_up(tmp_path)
    report = hand_back(layout)
    (tmp_path / "parent" / "edit").write_text("the parent's, after the hand-back\n")
    points: list[str] = []
    assert hand_back(layout, hook=points.append) == report
    assert points == []
    assert (tmp_path / "parent" / "edit").read_text() == "the parent's, after the hand-back\n"


def test_a_parent_change_during_the_hand_back_stops_it_and_the_copy_stays(tmp_path: Path) -> None:
    layout = set_up(tmp_path)
    parent_dir = tmp_path / "parent"

    def parent_edits_edit(point: str) -> None:
        if point == "remove:gone":  # removals run before writes: "edit" is still to come
            (parent_dir / "edit").write_text("the parent's edit, mid hand-back\n")

    with pytest.raises(HandbackError) as failed:
        hand_back(layout, hook=parent_edits_edit)
    assert failed.value.path == "edit"
    assert failed.value.reason == "the parent changed it during the hand-back"
    assert failed.value.failure().copy == str(layout.copy)
    assert (parent_dir / "edit").read_text() == "the parent's edit, mid hand-back\n"  # not overwritten
    assert layout.copy.is_dir() and not layout.copy.is_symlink() and load_report(layout) is None
    report = hand_back(layout)  # a rerun plans again: now both changed it, differently
    assert ("edit", "both_changed") in [(c.path, c.reason) for c in report.conflicts]
    assert (layout.conflicts / "edit").read_bytes() == b"B\n"


def test_a_parent_change_found_at_a_later_rename_leaves_no_version_beside_any_path(tmp_path: Path) -> None:
    """The versions are made before the renames: a hand-back stopped at a later one removes those it did not
    rename, beside the parent's paths and in conflicts/, and a rerun finishes it."""
    layout = set_up(tmp_path)
    parent_dir = tmp_path / "parent"

    def parent_edits_link(point: str) -> None:
        if point == "take:edit":  # every version is made by now; "link" is renamed later
            assert temp_beside(parent_dir / "link").is_symlink() and temp_beside(layout.conflicts / "conflict").exists()
            (parent_dir / "link").unlink()
            (parent_dir / "link").write_text("the parent's, mid hand-back\n")

    with pytest.raises(HandbackError) as failed:
        hand_back(layout, hook=parent_edits_link)
    assert failed.value.path == "link"
    assert (parent_dir / "link").read_text() == "the parent's, mid hand-back\n"
    assert (parent_dir / "edit").read_bytes() == b"B\n"  # renamed before the change was found
    assert not handback_leftovers(parent_dir, layout.dir)
    report = hand_back(layout)
    assert ("link", "both_changed") in [(c.path, c.reason) for c in report.conflicts]
    assert not handback_leftovers(parent_dir, layout.dir)


def test_a_hand_back_whose_parent_directory_is_gone_fails_with_the_path_and_the_copy_stays(tmp_path: Path) -> None:
    layout = set_up(tmp_path)
    os.rename(tmp_path / "parent", tmp_path / "moved")
    with pytest.raises(HandbackError) as failed:
        hand_back(layout)
    assert failed.value.path == str(tmp_path / "parent")
    assert "not a directory" in failed.value.reason
    assert layout.copy.is_dir() and (layout.copy / "edit").read_bytes() == b"B\n"


# ---------------------------------------------------------------------------------------------------------------------
# Change detection


def simple(root: Path) -> WorkspaceLayout:
    return set_up(root, {"f": A, "g": A}, {"f": A, "g": A}, {"f": A, "g": A})


def test_an_edit_keeping_the_size_and_mtime_is_still_seen(tmp_path: Path) -> None:
    """The child and the parent each rewrite a file with the same size and put its mtime back: ctime tells."""
    layout = simple(tmp_path)
    for edited in (layout.copy / "f", tmp_path / "parent" / "g"):
        before = os.lstat(edited)
        edited.write_bytes(b"Z\n")  # same size as "A\n"
        os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = os.lstat(edited)
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    report = hand_back(layout)
    assert report.paths_taken == ("f",)  # the child's edit is seen and taken
    assert (tmp_path / "parent" / "f").read_bytes() == b"Z\n"
    assert (tmp_path / "parent" / "g").read_bytes() == b"Z\n"  # the parent's is seen as the parent's own: kept
    assert report.conflicts == ()


def rewrite_record(layout: WorkspaceLayout, path: str, copy: StatFacts, recorded_at_ns: int) -> None:
    """Rewrite the spawn's record as if it had read `copy` for `path`, with its clock at `recorded_at_ns`."""
    record = msgspec.msgpack.decode(layout.copy_record.read_bytes(), type=CopyRecord)
    paths = tuple(msgspec.structs.replace(p, copy=packed_stat(copy)) if p.path == path else p for p in record.paths)
    new = msgspec.structs.replace(record, paths=paths, recorded_at_ns=recorded_at_ns)
    layout.copy_record.write_bytes(msgspec.msgpack.encode(new))


def stat_now(path: Path) -> StatFacts:
    st = os.lstat(path)
    return StatFacts(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def test_racy_git_a_file_recorded_in_the_clock_tick_of_the_record_is_compared_by_content(tmp_path: Path) -> None:
    """An edit in the same clock tick as the spawn's stat leaves stat data equal; since the file's mtime is not
    older than the record, its content is compared and the edit is seen. (The record is rewritten to hold the
    edited file's stat data: that is what a same-tick edit leaves, without waiting for a tick.)"""
    layout = simple(tmp_path)
    edited = layout.copy / "f"
    edited.write_bytes(b"Z\n")
    now = stat_now(edited)
    rewrite_record(layout, "f", now, recorded_at_ns=now.mtime_ns)  # the record began in the file's tick
    assert hand_back(layout).paths_taken == ("f",)
    assert (tmp_path / "parent" / "f").read_bytes() == b"Z\n"


def test_stat_data_older_than_the_record_is_trusted_without_reading(tmp_path: Path) -> None:
    """The other side of the rule: equal stat data recorded strictly before the record began proves sameness, and
    the bytes are not read (so this edit, hidden from stat on purpose, is not seen: the rule is what decides)."""
    layout = simple(tmp_path)
    edited = layout.copy / "f"
    edited.write_bytes(b"Z\n")
    now = stat_now(edited)
    rewrite_record(layout, "f", now, recorded_at_ns=now.mtime_ns + 1)
    assert hand_back(layout).paths_taken == ()
    assert (tmp_path / "parent" / "f").read_bytes() == b"A\n"


def test_new_files_are_found_in_the_directories_that_changed_and_edits_everywhere(tmp_path: Path) -> None:
    """With old stat data, unchanged directories are not listed again; a directory that gained, lost or swapped an
    entry is, so every new file is found, and an edit anywhere is seen through its own stat data."""
    base: Tree = {f"d{i}/s{j}/f": A for i in range(3) for j in range(3)}
    parent_dir = tmp_path / "parent"
    parent_dir.mkdir()
    reshape(parent_dir, base)
    age(parent_dir)
    layout = WorkspaceLayout.at(tmp_path / "workspaces", "session", "child")
    create_workspace(parent_dir, layout)
    (layout.copy / "d0" / "s1" / "new").write_text("a new file in an old directory\n")
    (layout.copy / "d1" / "fresh" / "deeper").mkdir(parents=True)
    (layout.copy / "d1" / "fresh" / "deeper" / "n").write_text("in a new directory\n")
    (layout.copy / "d2" / "s2" / "f").write_text("an edit in an untouched directory\n")
    os.unlink(layout.copy / "d2" / "s0" / "f")
    report = hand_back(layout)
    assert report.paths_taken == ("d0/s1/new", "d1/fresh/deeper/n", "d2/s0/f", "d2/s2/f")
    assert report.paths_removed == ("d2/s0/f",)
    assert (parent_dir / "d1" / "fresh" / "deeper" / "n").read_text() == "in a new directory\n"


def test_a_mode_change_alone_is_a_change(tmp_path: Path) -> None:
    layout = simple(tmp_path)
    os.chmod(layout.copy / "f", 0o755)
    assert hand_back(layout).paths_taken == ("f",)
    assert stat.S_IMODE(os.lstat(tmp_path / "parent" / "f").st_mode) == 0o755


def test_the_paths_read_as_changed_are_the_paths_where_the_childs_tree_differs_from_the_base(tmp_path: Path) -> None:
    """The child's copy read once gives the paths the parent is read at, exactly the paths where the child's file or
    symlink is not the base's (changed, removed, re-moded, re-linked and new; never a kept one), and the child's
    tree at those paths."""
    parent = tmp_path / "project"
    for index in range(30):
        path = parent / f"d{index % 4}" / f"f{index}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {index}\n")
    os.symlink("f0.txt", parent / "d0" / "link")
    os.symlink("f0.txt", parent / "d0" / "relinked")
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    create_workspace(parent, layout)
    (layout.copy / "d1" / "f5.txt").write_text("changed by the child\n")
    (layout.copy / "d2" / "f6.txt").unlink()
    shutil.rmtree(layout.copy / "d3")
    os.chmod(layout.copy / "d0" / "f4.txt", 0o755)
    (layout.copy / "d0" / "new.txt").write_text("new\n")
    (layout.copy / "d0" / "relinked").unlink()
    os.symlink("f4.txt", layout.copy / "d0" / "relinked")
    record = spawn.load_copy_record(layout)
    base = facts._Base(str(layout.base), record.recorded_at_ns, {p.path: p for p in record.paths})
    tree, changed = facts.read_child(base, str(layout.copy), record.dirs)

    assert sorted(changed) == [
        "d0/f4.txt", "d0/new.txt", "d0/relinked", "d1/f5.txt", "d2/f6.txt",
        *sorted(f"d3/f{index}.txt" for index in range(3, 30, 4)),
    ]  # fmt: skip
    assert sorted(tree) == ["d0/f4.txt", "d0/new.txt", "d0/relinked", "d1/f5.txt"]  # the removed ones have none
    assert tree["d0/relinked"] == Link("f4.txt")
    assert facts.BASE_FILE not in tree.values()


HANG_S = 30.0  # only a hang reaches it
STAT_CHECK = os.path.dirname(facts.stat_check.__file__)
ANSWER_THE_LAST = (
    f"import marshal, os, struct, sys, threading; sys.path.insert(0, {STAT_CHECK!r}); import stat_check; "
    "groups = marshal.loads(sys.stdin.buffer.read()); found = []; "
    "stat_check.check_group(struct.Struct(sys.argv[2]), sys.argv[1], groups[-1], found); "
    "frame = marshal.dumps((len(groups) - 1, found)); os.write(1, len(frame).to_bytes(4, 'little') + frame); "
    "threading.Event().wait()"
)
HELPERS = {
    "working": (facts.STAT_HELPER_ARGV, "all"),
    "answers_the_last_then_hangs": ((sys.executable, "-c", ANSWER_THE_LAST), "one"),
    "answers_out_of_order": ((sys.executable, "-c", "import os; os.write(1, b'\\x02\\0\\0\\0N0')"), "one"),
    "broken": ((sys.executable, "-c", "import sys; sys.exit('it broke')"), "all"),
    "hung": ((sys.executable, "-c", "import threading; threading.Event().wait()"), "none"),
}
"""Each helper, and which of its answers this side waits for before it checks a group itself (so how many groups
it checks is known): all of them (its output's end), the first one, or none."""


@pytest.mark.parametrize("helper_argv", sorted(HELPERS))
def test_a_hand_back_whose_stat_checks_a_helper_process_shares_ends_as_one_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper_argv: str
) -> None:
    """With a stat-check helper process offered the record's files (or one that answers only some of them, dies or
    hangs), every step and the record are those of a hand-back that checks it all alone, each group is checked
    here exactly when the helper did not answer it, and no helper outlives the hand-back."""
    alone = outcome(tmp_path / "alone", layout := set_up(tmp_path / "alone", old=True), hand_back(layout))
    argv, wait_for = HELPERS[helper_argv]
    monkeypatch.setattr(helper, "HELPER_FROM", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(facts, "HELPER_SHARE", 1.0)  # every checkable file, the changed ones too
    monkeypatch.setattr(facts, "STAT_HELPER_ARGV", argv)
    offered: list[int] = []
    shared_unproven = facts._shared_unproven

    def after_the_answers(helping: HelperProcess, groups: list[StatGroup], copy_root: str) -> list[str]:
        offered.append(len(groups))
        if wait_for == "all":
            helping._process.wait(HANG_S)
        elif wait_for == "one":
            assert select.select([helping.output_fd], [], [], HANG_S)[0], "no answer"
        return shared_unproven(helping, groups, copy_root)

    monkeypatch.setattr(facts, "_shared_unproven", after_the_answers)
    checked: list[str] = []
    check_group = facts.check_group
    monkeypatch.setattr(facts, "check_group", lambda *args: checked.append(args[2][0]) or check_group(*args))
    before = {child.pid for child in psutil.Process().children()}
    helped = outcome(tmp_path / "helped", layout := set_up(tmp_path / "helped", old=True), hand_back(layout))
    assert helped == alone
    assert offered and offered[0] >= 2, "the helper was offered two directories at least"
    here = {"working": 0, "answers_the_last_then_hangs": offered[0] - 1}.get(helper_argv, offered[0])
    assert len(checked) == here, checked
    assert {child.pid for child in psutil.Process().children()} <= before
