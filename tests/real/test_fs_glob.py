"""`fs.glob` on real trees: `**`, the hidden rule, .gitignore, order, refusals and the bound."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest

from eukhe.core.bound import Off
from eukhe.fs import GlobArgs, Reason, glob
from tests.real.fs_support import local, make_tree, refused, small_limits

pytestmark = pytest.mark.real

TREE: dict[str, str | None] = {
    "a.py": "",
    "b.txt": "",
    "a/b.py": "",
    "a/c/d.py": "",
    "a-b.py": "",
    ".hidden.py": "",
    ".github/workflows/ci.yml": "",
    "src/.cache/x.py": "",
    "build/out.py": "",
    "logs/app.log": "",
    "empty": None,
    ".gitignore": "build/\n*.log\n",
}


def paths(root: Path, pattern: str, path: str = ".") -> list[str]:
    answer = glob(local(root, Off()), GlobArgs(pattern=pattern, path=path))
    found = answer.output.text.splitlines()
    assert answer.count == len(found)
    return found


def test_glob_matches_by_component_with_double_star(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", TREE)
    (root / "link.py").symlink_to(root / "a.py")
    os.mkfifo(root / "fifo.py")
    assert paths(root, "*.py") == ["a-b.py", "a.py"]  # one level; no hidden, symlink or FIFO
    assert paths(root, "**/*.py") == ["a/b.py", "a/c/d.py", "a-b.py", "a.py"]  # sorted by path, component-wise
    assert paths(root, "a/**") == ["a/b.py", "a/c/d.py"]
    assert paths(root, "a/**/d.py") == ["a/c/d.py"]
    assert paths(root, "?.*") == ["a.py", "b.txt"]
    assert paths(root, "[ab].py") == ["a.py"]
    assert paths(root, "**/c/*") == ["a/c/d.py"]
    assert paths(root, ".github/**/*.yml") == [".github/workflows/ci.yml"]  # a literal dot reaches hidden names
    assert paths(root, ".*") == [".gitignore", ".hidden.py"]
    assert paths(root, "**/.cache/*") == ["src/.cache/x.py"]
    assert paths(root, "**") == ["a/b.py", "a/c/d.py", "a-b.py", "a.py", "b.txt"]
    assert paths(root, "*.py", "a") == ["b.py"]
    assert paths(root, "empty/*") == []


def test_glob_never_lists_ignored_files(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", TREE)
    assert paths(root, "build/*") == []
    assert paths(root, "**/*.log") == []
    (root / ".gitignore").write_text("build/\n*.log\n!app.log\n")
    assert paths(root, "**/*.log") == ["logs/app.log"]


def test_glob_refusals(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", TREE)
    context = local(root)
    for bad in ("", "/abs/*", "a/../b", "dir/", "."):
        refused(partial(glob, context, GlobArgs(pattern=bad)), Reason.INVALID_PATTERN)
    refused(lambda: glob(context, GlobArgs(pattern="*", path="missing")), Reason.NOT_FOUND)
    refused(lambda: glob(context, GlobArgs(pattern="*", path="a.py")), Reason.NOT_A_DIRECTORY)


def test_glob_answer_is_bounded(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", {f"f{n:04d}.txt": "" for n in range(500)})
    answer = glob(local(root, small_limits(10_000, 20), tmp_path / "artifacts"), GlobArgs(pattern="*.txt"))
    assert answer.count == 500 and answer.output.text.splitlines() == [f"f{n:04d}.txt" for n in range(20)]
    assert (
        answer.output.lines_dropped == 480 and answer.output.notice is not None and answer.output.artifact is not None
    )
    assert Path(answer.output.artifact).read_text().splitlines()[-1] == "f0499.txt"
