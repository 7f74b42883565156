"""The facts a hand-back reads (spec S3 "A subagent's workspace" 2, 4; issue 11.4): three trees for the core.

- The base: the spawn's record (no disk read).
- The child: its copy listed with its `.gitignore` files only, plus every base path looked up directly (a tracked
  file the child's rules ignore is still the child's file, not a removal).
- The parent: each path of the merge looked up in the parent's directory, its directories checked one by one with
  lstat (a symlink where a directory goes is never followed: the path is under a file).

Change detection is fast and never fooled: a file whose stat data (size, mtime, ctime, inode, mode) equal the
record's, recorded strictly before the copy began, is the base's (`stat_proves_same`, the racy-git rule); any other
file is read and compared with the base's bytes. A file's identity is `BASE` when its bytes and mode are the
base's, else its mode and blake2b digest, so equal identities mean equal files.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from eukhe.core.merge import Dir, Entry, File, Leaf, Link, StatFacts, ancestors, merge_paths, stat_proves_same
from eukhe.workspace.layout import WorkspaceLayout
from eukhe.workspace.listing import walk_gitignored
from eukhe.workspace.records import CopiedPath, CopyRecord, FileStat
from eukhe.workspace.spawn import file_stat

BASE = "="
"""The identity of a file whose bytes and mode are the base's at that path."""
PLACEHOLDER = "?"
"""The identity of a parent's file outside the merge that only stands in a merged path's way (never compared)."""


def core_stat(recorded: FileStat) -> StatFacts:
    return StatFacts(recorded.size, recorded.mtime_ns, recorded.ctime_ns, recorded.inode, recorded.mode)


def digest(path: str) -> str:
    """The blake2b digest of a file's bytes (not following a symlink)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        return hashlib.file_digest(handle, "blake2b").hexdigest()


@dataclass(slots=True)
class _Base:
    """The base's side of change detection: the record by path, and digests read on demand."""

    root: str
    recorded_at_ns: int
    by_path: dict[str, CopiedPath]
    digests: dict[str, str] = field(default_factory=dict)

    def digest(self, path: str) -> str:
        if path not in self.digests:
            self.digests[path] = digest(os.path.join(self.root, path))
        return self.digests[path]

    def identity(self, path: str, full_path: str, st: os.stat_result, recorded: FileStat | None) -> str:
        """A regular file's identity; `recorded` is its stat data at the spawn (None: not recorded)."""
        copied = self.by_path.get(path)
        if recorded is not None and stat_proves_same(
            core_stat(recorded), core_stat(file_stat(st)), self.recorded_at_ns
        ):
            return BASE
        mode = stat.S_IMODE(st.st_mode)
        own = digest(full_path)
        same_shape = copied is not None and copied.link is None and copied.copy.size == st.st_size
        if same_shape and copied is not None and stat.S_IMODE(copied.copy.mode) == mode and self.digest(path) == own:
            return BASE
        return f"{mode:o}:{own}"


class _Looker:
    """lstat under a root, checking each directory of a path once: never follows a symlink where a directory goes."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.kinds: dict[str, str] = {}  # directory path -> "dir", "leaf" or "missing"

    def kind(self, path: str) -> str:
        if path not in self.kinds:
            try:
                mode = os.lstat(os.path.join(self.root, path)).st_mode
            except (FileNotFoundError, NotADirectoryError):
                self.kinds[path] = "missing"
            else:
                self.kinds[path] = "dir" if stat.S_ISDIR(mode) else "leaf"
        return self.kinds[path]

    def look(self, path: str) -> tuple[os.stat_result | None, str | None]:
        """(lstat of the path or None if nothing is there, the file or symlink it is under or None)."""
        for above in ancestors(path):
            kind = self.kind(above)
            if kind == "missing":
                return None, None
            if kind == "leaf":
                return None, above
        try:
            return os.lstat(os.path.join(self.root, path)), None
        except (FileNotFoundError, NotADirectoryError):
            return None, None


@dataclass(frozen=True, slots=True)
class Facts:
    """The three trees of a hand-back, and what lstat found at each merged path of the parent."""

    base: dict[str, Entry]
    parent: dict[str, Entry]
    child: dict[str, Entry]
    parent_seen: dict[str, FileStat | None]  # a merged path's lstat in the parent (None: nothing there)


def _leaf(base: _Base, path: str, full_path: str, st: os.stat_result, recorded: FileStat | None) -> Leaf | None:
    if stat.S_ISLNK(st.st_mode):
        return Link(os.readlink(full_path))
    if stat.S_ISREG(st.st_mode):
        return File(base.identity(path, full_path, st, recorded))
    return None


def read_child(base: _Base, copy_root: str) -> dict[str, Entry]:
    """The child's tree: its copy's files by its .gitignore files, and every base path wherever it is."""
    child: dict[str, Entry] = {}
    for path, entry in walk_gitignored(Path(copy_root)):
        copied = base.by_path.get(path)
        recorded = None if copied is None else copied.copy
        leaf = _leaf(base, path, entry.path, entry.stat(follow_symlinks=False), recorded)
        if leaf is not None:
            child[path] = leaf
    looker = _Looker(copy_root)
    for path, copied in base.by_path.items():
        if path in child:
            continue
        st, _ = looker.look(path)
        if st is not None:
            leaf = _leaf(base, path, os.path.join(copy_root, path), st, copied.copy)
            if leaf is not None:
                child[path] = leaf
    return child


def read_parent(base: _Base, parent_root: str, paths: list[str]) -> tuple[dict[str, Entry], dict[str, FileStat | None]]:
    """The parent's tree at the merged paths (and the files in their way), and what lstat found at each."""
    looker = _Looker(parent_root)
    parent: dict[str, Entry] = {}
    seen: dict[str, FileStat | None] = {}
    for path in sorted(paths):  # a path comes after the paths above it
        st, blocker = looker.look(path)
        if blocker is not None:
            parent.setdefault(blocker, File(PLACEHOLDER))
        seen[path] = None if st is None else file_stat(st)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            parent[path] = Dir()
            continue
        copied = base.by_path.get(path)
        full_path = os.path.join(parent_root, path)
        leaf = _leaf(base, path, full_path, st, None if copied is None else copied.source)
        # A fifo, socket or device is the parent's own: it never reads as the base's, so it is never overwritten.
        parent[path] = leaf if leaf is not None else File(f"special:{st.st_mode:o}:{st.st_ino}")
    return parent, seen


def read_facts(layout: WorkspaceLayout, record: CopyRecord) -> Facts:
    """Read the base (the record), the child's copy and the parent's directory."""
    base = _Base(str(layout.base), record.recorded_at_ns, {copied.path: copied for copied in record.paths})
    base_tree: dict[str, Entry] = {p.path: (File(BASE) if p.link is None else Link(p.link)) for p in record.paths}
    child = read_child(base, str(layout.copy))
    parent_root = record.parent_dir
    if not os.path.isdir(parent_root):
        raise NotADirectoryError(errno.ENOTDIR, "the parent's directory is gone or not a directory", parent_root)
    parent, seen = read_parent(base, parent_root, sorted(merge_paths(base_tree, child)))
    return Facts(base=base_tree, parent=parent, child=child, parent_seen=seen)
