"""Real trees on disk for the workspace tests: make a model tree real, reshape a directory into one, read one back.

Model files carry an identity the disk spells as bytes and a mode: "A" and "B" are plain files; "C" has A's bytes
with the executable bits, so a mode change alone must read as a change.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

from eukhe.core.merge import Dir, Entry, File, Link, implied_dirs

CONTENT: dict[str, tuple[bytes, int]] = {"A": (b"A\n", 0o644), "B": (b"B\n", 0o644), "C": (b"A\n", 0o755)}
IDENTITY = {spelled: identity for identity, spelled in CONTENT.items()}

DiskLeaf = tuple[str, bytes | str, int]
"""("file", bytes, mode) or ("link", target, 0)."""


def disk_leaf(entry: File | Link) -> DiskLeaf:
    """How a model file or symlink reads on disk."""
    if isinstance(entry, Link):
        return ("link", entry.target, 0)
    data, mode = CONTENT[entry.identity]
    return ("file", data, mode)


def read_disk(root: Path) -> tuple[dict[str, DiskLeaf], set[str]]:
    """Every file and symlink under `root` (not following symlinks), and every directory."""
    leaves: dict[str, DiskLeaf] = {}
    dirs: set[str] = set()
    for here, subdirs, files in os.walk(root):
        relative_here = os.path.relpath(here, root)
        prefix = "" if relative_here == "." else relative_here + "/"
        for name in list(subdirs):
            full = os.path.join(here, name)
            if os.path.islink(full):
                subdirs.remove(name)
                leaves[prefix + name] = ("link", os.readlink(full), 0)
            else:
                dirs.add(prefix + name)
        for name in files:
            full = os.path.join(here, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                leaves[prefix + name] = ("link", os.readlink(full), 0)
            else:
                leaves[prefix + name] = ("file", Path(full).read_bytes(), stat.S_IMODE(st.st_mode))
    return leaves, dirs


def expected_disk(tree: Mapping[str, Entry]) -> tuple[dict[str, DiskLeaf], set[str]]:
    """What `read_disk` gives for a directory that holds exactly the model tree."""
    leaves = {path: disk_leaf(entry) for path, entry in tree.items() if isinstance(entry, File | Link)}
    return leaves, set(implied_dirs(tree))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def reshape(root: Path, tree: Mapping[str, Entry]) -> None:
    """Change the directory at `root` into exactly the model tree, touching only what differs."""
    want_leaves, want_dirs = expected_disk(tree)
    have_leaves, have_dirs = read_disk(root)
    for path, leaf in have_leaves.items():
        if want_leaves.get(path) != leaf and os.path.lexists(root / path):
            _remove(root / path)
    for path in sorted(have_dirs, key=lambda p: -p.count("/")):
        if path not in want_dirs and os.path.lexists(root / path):
            _remove(root / path)
    for path in sorted(want_dirs, key=lambda p: p.count("/")):
        (root / path).mkdir(exist_ok=True)
    for path, entry in tree.items():
        if isinstance(entry, Dir) or (have_leaves.get(path) == disk_leaf(entry) and os.path.lexists(root / path)):
            continue
        write_leaf(root / path, entry)


def write_leaf(path: Path, entry: File | Link) -> None:
    """One model file or symlink on disk."""
    if isinstance(entry, Link):
        os.symlink(entry.target, path)
        return
    data, mode = CONTENT[entry.identity]
    path.write_bytes(data)
    os.chmod(path, mode)


def git(directory: Path, *args: str) -> str:
    """Run git in `directory` (a fixed identity, no user config); its stdout."""
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    done = subprocess.run(["git", *args], cwd=directory, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def handback_leftovers(*roots: Path) -> list[str]:
    """Fixed-name copies or retired copies left anywhere under `roots`."""
    left = []
    for root in roots:
        for here, subdirs, files in os.walk(root):
            for name in [*subdirs, *files]:
                if name.endswith(".eukhe-handback") or name.endswith(".eukhe-retired"):
                    left.append(os.path.join(here, name))
    return left


OLD_NS = 1_000_000_000_000_000_000  # 2001-09-09: long before any record, so stat data are trusted


def age(root: Path, mtime_ns: int = OLD_NS) -> None:
    """Set every file's, symlink's and directory's times under `root` (and its own) to `mtime_ns`."""
    for here, subdirs, files in os.walk(root, topdown=False):
        for name in [*files, *subdirs]:
            os.utime(os.path.join(here, name), ns=(mtime_ns, mtime_ns), follow_symlinks=False)
    os.utime(root, ns=(mtime_ns, mtime_ns))
