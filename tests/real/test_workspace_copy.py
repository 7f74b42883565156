"""The copy at spawn on real disks (spec S3 "A subagent's workspace" 2, 3, 7): what is copied, with git and without,
the 100,000-file refusal, modes, symlinks and mtimes, the byte-copy fallback and its one warning, and FICLONE on a
real XFS loop mount (made when the suite runs as root; skipped with the reason otherwise)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from eukhe.core.merge import STAT_PACKING, packed_stat, unpacked_stat
from eukhe.workspace import (
    MAX_WORKSPACE_FILES,
    CopyError,
    WorkspaceExistsError,
    WorkspaceLayout,
    WorkspaceNameError,
    WorkspaceTooLargeError,
    create_workspace,
    hand_back,
    helper,
    list_workspace,
    spawn,
    stat_check,
)
from eukhe.workspace.copier import Copier
from eukhe.workspace.listing import walk_gitignored
from eukhe.workspace.spawn import stat_facts
from tests.real.tools import need_tools, needs_tools
from tests.workspace_support import git, read_disk

pytestmark = pytest.mark.real

needs_git = needs_tools("git")


def files_of(root: Path) -> set[str]:
    return set(read_disk(root)[0])


def make_project(root: Path) -> None:
    """A project with ignored files and directories at several levels, a negation, an anchored pattern."""
    for path, text in {
        ".gitignore": "target/\n*.log\n/build\n!keep.log\n!/build/kept.txt\n",
        "build/kept.txt": "still ignored: a file in an ignored directory cannot be re-included\n",
        "src/main.rs": "fn main() {}\n",
        "src/app.log": "ignored by *.log\n",
        "src/keep.log": "re-included by !keep.log\n",
        "src/build/out.txt": "not ignored: /build is anchored to the top\n",
        "build/out.txt": "ignored: /build\n",
        "target/debug/app": "ignored directory\n",
        "docs/.gitignore": "*.tmp\n!important.tmp\n",
        "docs/guide.md": "guide\n",
        "docs/scratch.tmp": "ignored by docs/.gitignore\n",
        "docs/important.tmp": "re-included in docs/\n",
        "docs/deep/x.tmp": "ignored by docs/.gitignore below docs\n",
        "x.tmp": "not ignored: the docs rule does not reach the top\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


EXPECTED = {
    ".gitignore",
    "src/main.rs",
    "src/keep.log",
    "src/build/out.txt",
    "docs/.gitignore",
    "docs/guide.md",
    "docs/important.tmp",
    "x.tmp",
}


@pytest.mark.parametrize("language", [None, "de"], ids=["untranslated", "german"])
def test_copy_omits_ignored_files_and_directories_without_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, language: str | None
) -> None:
    """Also for a user whose git speaks another language (LANGUAGE=de, where git's German messages are installed):
    a directory git refuses is known as such in any locale, and the .gitignore walk lists it."""
    if language is not None:
        monkeypatch.setenv("LANG", "C.UTF-8")
        monkeypatch.setenv("LANGUAGE", language)
    parent = tmp_path / "project"
    make_project(parent)
    (parent / ".git").mkdir()  # not a repository: git refuses it, the .gitignore walk lists; .git never copied
    (parent / ".git" / "config").write_text("junk\n")
    assert set(list_workspace(parent)) == EXPECTED
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    copied = create_workspace(parent, layout)
    assert copied.files == len(EXPECTED)
    assert files_of(layout.base) == EXPECTED
    assert files_of(layout.copy) == EXPECTED
    assert not (layout.copy / ".git").exists() and not (layout.copy / "target").exists()


@needs_git
def test_copy_omits_ignored_files_and_directories_with_git(tmp_path: Path) -> None:
    parent = tmp_path / "project"
    make_project(parent)
    git(parent, "init", "-q")
    (parent / "tracked.log").write_text("tracked although *.log ignores it\n")
    git(parent, "add", "-f", "tracked.log", ".gitignore", "src/main.rs")
    git(parent, "commit", "-qm", "init")
    (parent / ".git" / "info" / "exclude").write_text("secret.txt\n")
    (parent / "secret.txt").write_text("excluded by .git/info/exclude at spawn\n")
    (parent / "untracked.txt").write_text("untracked, not ignored\n")
    expected = EXPECTED | {"tracked.log", "untracked.txt"}
    assert set(list_workspace(parent)) == expected
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    create_workspace(parent, layout)
    assert files_of(layout.copy) == expected == files_of(layout.base)
    assert not (layout.copy / ".git").exists()


@needs_git
def test_the_hand_back_lists_the_child_with_its_gitignore_files_only(tmp_path: Path) -> None:
    """A child file only .git/info/exclude ignores comes back; one its .gitignore ignores does not; a tracked file
    the .gitignore ignores is still the child's (unchanged: not a removal)."""
    parent = tmp_path / "project"
    make_project(parent)
    git(parent, "init", "-q")
    (parent / "tracked.log").write_text("tracked\n")
    git(parent, "add", "-f", "tracked.log")
    git(parent, "commit", "-qm", "init")
    (parent / ".git" / "info" / "exclude").write_text("secret.txt\n")
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    create_workspace(parent, layout)
    (layout.copy / "secret.txt").write_text("the child's\n")
    (layout.copy / "new.log").write_text("ignored by the child's .gitignore\n")
    (layout.copy / "target" / "x").parent.mkdir()
    (layout.copy / "target" / "x").write_text("ignored directory\n")
    report = hand_back(layout)
    assert report.paths_taken == ("secret.txt",)
    assert (parent / "secret.txt").read_text() == "the child's\n"
    assert not (parent / "new.log").exists()
    assert (parent / "tracked.log").read_text() == "tracked\n"


def test_a_planted_gitignore_fifo_or_symlink_is_not_read_by_the_listing(tmp_path: Path) -> None:
    """The listing reads a .gitignore the child may have planted: a FIFO does not hang it, and a symlink to a file
    outside is not followed (its lines do not decide what is listed), in the root and in a subdirectory."""
    outside = tmp_path / "secret"
    outside.write_text("*.txt\n")
    root = tmp_path / "copy"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    (root / "sub" / "b.txt").write_text("b\n")
    os.mkfifo(root / ".gitignore")
    (root / "sub" / ".gitignore").symlink_to(outside)
    listed = {path for path, _ in walk_gitignored(root)}
    assert {"a.txt", "sub/b.txt"} <= listed


def test_a_gitignore_swapped_for_a_fifo_while_it_is_listed_does_not_hang_the_listing(tmp_path: Path) -> None:
    """A child swaps its .gitignore between a regular file and a FIFO while the listing reads it: the read opens
    without blocking and checks what it opened, so no swap can leave the listing waiting for a writer."""
    root = tmp_path / "copy"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    regular, fifo = tmp_path / "regular", tmp_path / "fifo"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            regular.write_text("*.log\n")
            os.replace(regular, root / ".gitignore")
            if not fifo.exists():
                os.mkfifo(fifo)
            os.replace(fifo, root / ".gitignore")

    def list_many(done: list[int]) -> None:
        for _ in range(3000):
            walk_list = {path for path, _ in walk_gitignored(root)}
            assert "a.txt" in walk_list
            done.append(1)

    swapper = threading.Thread(target=swap, daemon=True)
    done: list[int] = []
    lister = threading.Thread(target=list_many, args=(done,), daemon=True)
    swapper.start()
    lister.start()
    lister.join(timeout=120)
    stop.set()
    hung = lister.is_alive()
    if hung:  # release the stuck open so the thread ends
        with contextlib.suppress(OSError), open(os.open(root / ".gitignore", os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass
    swapper.join(timeout=60)
    assert not hung, f"the listing hung on a FIFO after {len(done)} listings"
    assert len(done) == 3000


def test_more_files_than_the_limit_are_refused_naming_shared(tmp_path: Path) -> None:
    parent = tmp_path / "project"
    parent.mkdir()
    for index in range(15):
        (parent / f"f{index}").write_text("x")
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    with pytest.raises(WorkspaceTooLargeError, match='workspace="shared"') as refused:
        create_workspace(parent, layout, max_files=10)
    assert refused.value.limit == 10
    assert refused.value.files == 11  # the walk stops at the first file past the limit
    assert not (tmp_path / "ws").exists()  # refused before anything is made
    assert create_workspace(parent, layout, max_files=15).files == 15


@needs_git
def test_more_files_than_the_limit_are_refused_in_a_git_tree(tmp_path: Path) -> None:
    parent = tmp_path / "project"
    parent.mkdir()
    git(parent, "init", "-q")
    for index in range(11):
        (parent / f"f{index}").write_text("x")
    with pytest.raises(WorkspaceTooLargeError, match="shared"):
        create_workspace(parent, WorkspaceLayout.at(tmp_path / "ws", "s", "c"), max_files=10)


def test_the_real_limit_refuses_one_file_more_than_100000(tmp_path: Path) -> None:
    assert MAX_WORKSPACE_FILES == 100_000
    parent = tmp_path / "project"
    for group in range(101):
        (parent / f"d{group}").mkdir(parents=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for index in range(MAX_WORKSPACE_FILES + 1):
        os.close(os.open(parent / f"d{index % 101}" / f"f{index}", flags, 0o644))
    with pytest.raises(WorkspaceTooLargeError, match="100000 files"):
        create_workspace(parent, WorkspaceLayout.at(tmp_path / "ws", "s", "c"))
    assert not (tmp_path / "ws").exists()
    shutil.rmtree(parent)  # pytest keeps recent temp dirs: do not leave 100,001 files behind


def test_the_copy_keeps_symlinks_modes_and_mtimes_and_makes_its_dirs_private(tmp_path: Path) -> None:
    parent = tmp_path / "project"
    (parent / "bin").mkdir(parents=True)
    (parent / "shared").mkdir(mode=0o750)
    os.chmod(parent / "shared", 0o750)
    (parent / "bin" / "run").write_text("#!/bin/sh\n")
    os.chmod(parent / "bin" / "run", 0o755)
    (parent / "shared" / "secret").write_text("s\n")
    os.chmod(parent / "shared" / "secret", 0o600)
    os.symlink("bin/run", parent / "run")
    os.symlink("/nowhere/at/all", parent / "dangling")
    os.utime(parent / "bin" / "run", ns=(1_000_000_000, 1_234_567_890_123))
    layout = WorkspaceLayout.at(tmp_path / "agent" / "workspaces", "s", "c")
    create_workspace(parent, layout)
    assert os.lstat(layout.copy / "bin" / "run").st_mtime_ns == 1_234_567_890_123  # the base keeps no times
    for root in (layout.base, layout.copy):
        assert stat.S_IMODE(os.lstat(root / "bin" / "run").st_mode) == 0o755
        assert stat.S_IMODE(os.lstat(root / "shared" / "secret").st_mode) == 0o600
        assert stat.S_IMODE(os.lstat(root / "shared").st_mode) == 0o750  # the user's directory keeps its mode
        assert os.readlink(root / "run") == "bin/run" and (root / "run").is_symlink()
        assert os.readlink(root / "dangling") == "/nowhere/at/all"
    for made in (tmp_path / "agent", tmp_path / "agent" / "workspaces", layout.dir, layout.base, layout.copy):
        assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700, made
    assert stat.S_IMODE(os.lstat(layout.copy_record).st_mode) == 0o600


def test_a_second_spawn_of_the_same_child_is_refused_and_an_interrupted_one_starts_over(tmp_path: Path) -> None:
    parent = tmp_path / "project"
    parent.mkdir()
    (parent / "a").write_text("a\n")
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    create_workspace(parent, layout)
    with pytest.raises(WorkspaceExistsError):
        create_workspace(parent, layout)
    layout.copy_record.unlink()  # as if the spawn had stopped before its record
    (layout.copy / "half-copied").write_text("left by the interrupted spawn\n")
    create_workspace(parent, layout)
    assert files_of(layout.copy) == {"a"}


def test_a_workspaces_root_inside_the_parents_directory_is_not_copied(tmp_path: Path) -> None:
    parent = tmp_path / "home"
    (parent / "project").mkdir(parents=True)
    (parent / "project" / "a").write_text("a\n")
    first = create_workspace(parent, WorkspaceLayout.at(parent / ".eukhe" / "workspaces", "s", "one"))
    assert first.files == 1
    second = create_workspace(parent, WorkspaceLayout.at(parent / ".eukhe" / "workspaces", "s", "two"))
    assert second.files == 1  # not the first child's base and copy
    assert files_of(Path(second.copy)) == {"project/a"}


def test_workspace_names_are_one_path_component(tmp_path: Path) -> None:
    for bad in ("", ".", "..", "a/b", "x\0y"):
        with pytest.raises(WorkspaceNameError):
            WorkspaceLayout.at(tmp_path, bad, "c")
        with pytest.raises(WorkspaceNameError):
            WorkspaceLayout.at(tmp_path, "s", bad)


def test_the_byte_copy_fallback_logs_one_warning_with_the_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    parent = tmp_path / "project"
    parent.mkdir()
    for index in range(5):
        (parent / f"f{index}").write_bytes(b"x" * (1000 + index))
    os.symlink("f0", parent / "link")
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    with caplog.at_level(logging.WARNING, logger="eukhe.workspace"):
        copied = create_workspace(parent, layout)
    if copied.cloned:
        pytest.skip(f"the default filesystem at {tmp_path} clones extents: no byte-copy fallback to see")
    assert (copied.files, copied.cloned, copied.copied_files) == (6, 0, 10)
    assert copied.copied_bytes == 2 * sum(1000 + index for index in range(5))
    warnings = [r for r in caplog.records if r.name == "eukhe.workspace" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "cannot clone" in message and f"copied {copied.copied_bytes} bytes" in message
    assert "in 10 file copies" in message and "(0 file copies cloned)" in message


def test_a_copy_made_with_the_helper_process_is_the_copy_made_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files copied in alternate runs of a few paths here and by the helper process give the same trees and the
    same record, in the listing's order, as a copy made in this process alone; modes the umask would cut are still
    the source's."""
    parent = tmp_path / "project"
    for index in range(40):
        path = parent / f"d{index % 3}" / f"e{index % 2}" / f"f{index}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {index}\n" * (index + 1))
        os.chmod(path, (0o644, 0o600, 0o755, 0o666, 0o4755)[index % 5])
    os.symlink("d0/e0/f0.txt", parent / "d1" / "link")
    (parent / "d2" / "e1" / "f5.txt").unlink()  # listed by no one: nothing to copy there
    records = []
    for name, helped in (("one", False), ("two", True)):
        if helped:
            monkeypatch.setattr(helper, "HELPER_FROM", 1)
            monkeypatch.setattr(spawn, "RUN_PATHS", 3)
            monkeypatch.setattr(os, "cpu_count", lambda: 2)
        layout = WorkspaceLayout.at(tmp_path / "ws", "s", name)
        copied = create_workspace(parent, layout)
        assert copied.files == 40
        assert read_disk(layout.base)[0] == read_disk(layout.copy)[0] == read_disk(parent)[0]
        for relative in files_of(parent):
            source, made = os.lstat(parent / relative), os.lstat(layout.copy / relative)
            assert (source.st_mode, source.st_mtime_ns) == (made.st_mode, made.st_mtime_ns), relative
        records.append(spawn.load_copy_record(layout))
    one, two = ([(p.path, p.link, p.source) for p in record.paths] for record in records)
    assert one == two == sorted(one)


# ---------------------------------------------------------------------------------------------------------------------
# FICLONE on a real XFS loop mount


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def xfs_mount() -> Iterator[Path]:
    """A fresh XFS filesystem with reflink, loop-mounted (root only); skipped with the reason otherwise."""
    if os.geteuid() != 0:
        pytest.skip("FICLONE on XFS needs a loop mount, which needs root")
    need_tools("mkfs.xfs", "mount", "umount")
    work = Path(tempfile.mkdtemp(prefix="ek-xfs-"))
    image, mount = work / "xfs.img", work / "mnt"
    mount.mkdir()
    with image.open("wb") as handle:
        handle.truncate(512 * 1024 * 1024)  # sparse; XFS needs at least 300 MB
    made = _run("mkfs.xfs", "-q", "-m", "reflink=1", str(image))
    if made.returncode != 0:
        shutil.rmtree(work)
        pytest.skip(f"mkfs.xfs failed: {made.stderr.strip()}")
    mounted = _run("mount", "-o", "loop", str(image), str(mount))
    if mounted.returncode != 0:
        shutil.rmtree(work)
        pytest.skip(f"cannot loop-mount an XFS image here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        _run("umount", str(mount))
        shutil.rmtree(work)


def physical_extents(path: Path) -> list[tuple[int, int, str]]:
    """(physical start, physical end, flags) of each extent, from `filefrag -v` (FIEMAP)."""
    os.sync()  # settle delayed allocation so the extents have their blocks
    out = _run("filefrag", "-v", str(path)).stdout
    rows = re.findall(r"^\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+\d+:\s*(\S*)", out, flags=re.M)
    return [(int(start), int(end), flags) for start, end, flags in rows]


@needs_tools("filefrag")
def test_ficlone_shares_extents_on_a_real_xfs_mount(xfs_mount: Path, caplog: pytest.LogCaptureFixture) -> None:
    parent = xfs_mount / "project"
    parent.mkdir()
    (parent / "big.bin").write_bytes(os.urandom(1024 * 1024))
    (parent / "small.txt").write_text("small\n")
    layout = WorkspaceLayout.at(xfs_mount / "agent" / "workspaces", "s", "c")
    with caplog.at_level(logging.WARNING, logger="eukhe.workspace"):
        copied = create_workspace(parent, layout)
    assert (copied.cloned, copied.copied_files, copied.copied_bytes) == (4, 0, 0)
    assert not [r for r in caplog.records if r.name == "eukhe.workspace"]  # cloned: nothing to warn about
    original = physical_extents(parent / "big.bin")
    assert original, "filefrag reported no extents"
    for clone in (layout.base / "big.bin", layout.copy / "big.bin"):
        extents = physical_extents(clone)
        assert [(start, end) for start, end, _ in extents] == [(start, end) for start, end, _ in original]
        assert all("shared" in flags for _, _, flags in extents)
    assert (layout.copy / "big.bin").read_bytes() == (parent / "big.bin").read_bytes()
    (layout.copy / "small.txt").write_text("changed by the child\n")
    assert hand_back(layout).paths_taken == ("small.txt",)
    assert (parent / "small.txt").read_text() == "changed by the child\n"


BROKEN_HELPERS = {
    "dies": ((sys.executable, "-c", "import sys; sys.exit('the helper broke')"), r"\(exit 1\): the helper broke"),
    "hangs": ((sys.executable, "-c", "import threading; threading.Event().wait()"), r"\(exit -9\): no answer within"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN_HELPERS))
def test_a_helper_process_that_fails_is_a_copy_error_with_its_last_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    """A helper that dies before it answers, or hangs, fails the spawn with what it said (a hung one is killed: no
    helper outlives the spawn), and the interrupted workspace is cleared by the next spawn, which copies every
    file."""
    parent = tmp_path / "project"
    parent.mkdir()
    for index in range(6):
        (parent / f"f{index}").write_text(f"{index}\n")
    argv, said = BROKEN_HELPERS[broken]
    monkeypatch.setattr(helper, "HELPER_FROM", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(spawn, "HELPER_ARGV", argv)
    if broken == "hangs":
        monkeypatch.setattr(spawn, "COPY_HELPER_PATIENCE_S", 0.2)  # killed when this has passed
    before = {child.pid for child in psutil.Process().children()}
    layout = WorkspaceLayout.at(tmp_path / "ws", "s", "c")
    with pytest.raises(CopyError, match=r"the copy helper failed " + said):
        create_workspace(parent, layout)
    assert {child.pid for child in psutil.Process().children()} <= before
    monkeypatch.undo()
    assert create_workspace(parent, layout).files == 6
    assert read_disk(layout.copy)[0] == read_disk(parent)[0]


def test_the_copier_and_the_stat_check_pack_a_files_stat_data_as_the_record_holds_them(tmp_path: Path) -> None:
    """The spawn's copier and the hand-back's stat check are standalone scripts, each with its own field order:
    both give the bytes the core's `STAT_PACKING` gives, for a file whose five fields all differ."""
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    os.utime(path, ns=(1, 123_456_789))  # an mtime unlike its ctime, so swapping the two shows
    st = os.lstat(path)
    assert len({st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode}) == 5
    copier = Copier("", "", "", 0o022, private_mode=0o600, packing=STAT_PACKING.format)
    recorded = packed_stat(stat_facts(st))
    assert copier.packed(st) == stat_check.packed_stat_of(STAT_PACKING, st) == recorded
    assert unpacked_stat(recorded) == stat_facts(st)
