"""The facts a hand-back reads (spec S3 "A subagent's workspace" 2, 4): three trees for the core, each at the paths
the child changed only (a plan has steps there alone, and a hand-back of a few changes in 10,000 files reads and
plans a few paths, not 10,000).

- The base: the spawn's record (no disk read).
- The child: every base path looked up where it is (a tracked file the child's rules ignore is still the child's
  file, not a removal), and the new entries of the directories whose stat data changed, listed with the copy's
  `.gitignore` files only.
- The parent: each path the child changed, looked up in the parent's directory, its directories checked one by one
  with lstat (a symlink where a directory goes is never followed: the path is under a file). Where the child kept
  the base's entry, the table keeps the parent's whatever it is, so nothing there needs reading.

Change detection is fast and never fooled: a file whose stat data (size, mtime, ctime, inode, mode) equal the
record's, recorded strictly before the copy began, is the base's (`stat_proves_same`, the racy-git rule); any other
file is read and compared with the base's bytes. A file's identity is `BASE` when its bytes and mode are the
base's, else its mode and blake2b digest, so equal identities mean equal files.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import logging
import marshal
import os
import stat
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from eukhe.core.merge import (
    STAT_PACKING,
    Dir,
    Entry,
    File,
    Leaf,
    Link,
    StatFacts,
    ancestors,
    path_order,
    stat_proves_same,
    unpacked_stat,
)
from eukhe.core.stat_plan import StatGroup, helpers_part, plan_stat_checks
from eukhe.records.workspace import CopiedDir, CopiedPath, CopyRecord
from eukhe.workspace import stat_check
from eukhe.workspace.helper import HelperProcess, helper_pays, standalone_argv
from eukhe.workspace.layout import WorkspaceLayout
from eukhe.workspace.listing import GIT_DIR_NAME, GitignoreRules, ignored, walk_gitignored
from eukhe.workspace.spawn import stat_facts
from eukhe.workspace.stat_check import FRAME_LENGTH, check_group, unproven

log = logging.getLogger(__name__)

STAT_HELPER_ARGV = standalone_argv(stat_check.__file__)
"""The stat-check helper (`stat_check.main`): standard library only."""

BASE = "="
"""The identity of a file whose bytes and mode are the base's at that path."""
BASE_FILE = File(BASE)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
PLACEHOLDER = "?"
"""The identity of a parent's file outside the merge that only stands in a merged path's way (never compared)."""


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

    def identity(self, path: str, full_path: str, st: os.stat_result, recorded: StatFacts | None) -> str:
        """A regular file's identity; `recorded` is its stat data at the spawn (None: not recorded)."""
        copied = self.by_path.get(path)
        if recorded is not None and stat_proves_same(recorded, stat_facts(st), self.recorded_at_ns):
            return BASE
        mode = stat.S_IMODE(st.st_mode)
        own = digest(full_path)
        was = None if copied is None or copied.link is not None else unpacked_stat(copied.copy)
        if was is not None and was.size == st.st_size and stat.S_IMODE(was.mode) == mode and self.digest(path) == own:
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
    """The three trees of a hand-back at the paths the child changed, and what lstat found there in the parent."""

    base: dict[str, Entry]
    parent: dict[str, Entry]
    child: dict[str, Entry]
    parent_seen: dict[str, StatFacts | None]  # lstat in the parent at each path the child changed (None: nothing)


def _leaf(base: _Base, path: str, full_path: str, st: os.stat_result, recorded: StatFacts | None) -> Leaf | None:
    if stat.S_ISLNK(st.st_mode):
        return Link(os.readlink(full_path))
    if stat.S_ISREG(st.st_mode):
        identity = base.identity(path, full_path, st, recorded)
        return BASE_FILE if identity == BASE else File(identity)
    return None


def _live_directories(base: _Base, copy_root: str, dirs: Iterable[CopiedDir]) -> tuple[set[str], list[str]]:
    """The recorded directories of the copy that are directories still (not removed, replaced by a file, or under
    one), and those whose stat data cannot prove that no entry came or went (to be listed again)."""
    live: set[str] = set()
    changed: list[str] = []
    for recorded in sorted(dirs, key=lambda d: path_order(d.path)):  # parents first
        path = recorded.path
        if path and path.rpartition("/")[0] not in live:
            continue  # its parent is gone or is not a directory: never look through it
        try:
            st = os.lstat(os.path.join(copy_root, path))
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue  # a file or symlink took its place: a new entry of its parent, which changed
        live.add(path)
        if not stat_proves_same(recorded.copy, stat_facts(st), base.recorded_at_ns):
            changed.append(path)
    return live, changed


def _open_dir(root: str, directory: str) -> int:
    """An fd of a directory of the copy (-1 if it is gone or is no directory now): never through a symlink."""
    try:
        return os.open(f"{root}/{directory}" if directory else root, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return -1


HELPER_SHARE = 0.75
"""The part of the files to check offered to the helper (the tail of the groups). This side checks the head, then
the offered groups from the first on, while the helper checks them from the last back: the two meet wherever the
helper's start and speed put the line, and this side never waits for the helper."""


class _HelperAnswers:
    """What a streaming stat helper has answered so far (`stat_check.main`'s frames), read without blocking: each
    offered group it checked (its index) with its unproven paths. It answers from the last group back, so the
    groups from `first` on are answered; a frame out of that order or undecodable ends the reading (the groups it
    did not answer are this side's)."""

    def __init__(self, fd: int, groups: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._buffer = b""
        self._reading = True
        self.found: dict[int, list[str]] = {}
        self.first = groups

    def read(self) -> int:
        """Take in what the helper wrote since the last read; the first group from which on it answered them all."""
        while self._reading:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                self._reading = False
            self._buffer += data
        buffer, at, head = self._buffer, 0, FRAME_LENGTH
        while len(buffer) - at >= head:
            end = at + head + int.from_bytes(buffer[at : at + head], "little")
            if len(buffer) < end:
                break
            try:
                index, paths = marshal.loads(buffer[at + head : end])
            except (ValueError, EOFError, TypeError):
                index, paths = None, None
            if index != self.first - 1 or not isinstance(paths, list):
                self._reading, self._buffer = False, b""
                return self.first
            self.found[index] = paths
            self.first = index
            at = end
        self._buffer = buffer[at:]
        return self.first


def _shared_unproven(helper: HelperProcess, offered: list[StatGroup], copy_root: str) -> list[str]:
    """The unproven paths of the groups offered to the helper: checked here from the first on until this side
    reaches the groups the helper answered; each group's answer taken once (`helpers_part`). A helper that fails or
    hangs only leaves more of them to this side."""
    answers = _HelperAnswers(helper.output_fd, len(offered))
    pack = struct.Struct(STAT_PACKING.format)
    found: list[str] = []
    here = 0
    while here < answers.read():
        check_group(pack, copy_root, offered[here], found)
        here += 1
    if here == len(offered) and (why := helper.failure()) is not None:
        log.warning("the hand-back's stat helper failed (%s); its groups were checked here", why)
    return found + helpers_part(here, answers.found)


def _read_base_paths(
    base: _Base,
    copy_root: str,
    live: set[str],
    child: dict[str, Entry],
    changed: list[str],
    *,
    helper: HelperProcess | None = None,
) -> None:
    """Each base path where the child's entry is not the base's into `changed`, with that entry (if any) in `child`.

    First the stat check (`stat_check.unproven`), shared with `helper` when one runs; then each file it could not
    prove the base's is read, by its name in its directory's fd (never through a symlink there)."""
    plan = plan_stat_checks(base.by_path.values(), live, base.recorded_at_ns, HELPER_SHARE if helper else 0.0)
    if helper is not None:
        helper.send(marshal.dumps(plan.theirs))
    found = unproven(copy_root, STAT_PACKING.format, plan.mine)
    if helper is not None:
        found += _shared_unproven(helper, plan.theirs, copy_root)
    for path in sorted([*plan.rest, *found], key=path_order):
        directory, _, name = path.rpartition("/")
        copied = base.by_path[path]
        st = _lstat_in(copy_root, directory, name) if directory in live else None
        if st is None:
            changed.append(path)  # the child has no entry there now
            continue
        leaf = _leaf(base, path, f"{copy_root}/{path}", st, unpacked_stat(copied.copy))
        if leaf != (BASE_FILE if copied.link is None else Link(copied.link)):
            changed.append(path)
            if leaf is not None:
                child[path] = leaf


def _lstat_in(root: str, directory: str, name: str) -> os.stat_result | None:
    """lstat of `name` in a directory of the copy, by the directory's fd (None: nothing there, or it is gone)."""
    dir_fd = _open_dir(root, directory)
    if dir_fd < 0:
        return None
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    finally:
        os.close(dir_fd)


def read_child(
    base: _Base, copy_root: str, dirs: tuple[CopiedDir, ...], *, helper: HelperProcess | None = None
) -> tuple[dict[str, Entry], list[str]]:
    """The paths where the child's file or symlink is not the base's (changed, removed, or new and not ignored by
    its .gitignore files), and the child's tree at those paths: the only paths a hand-back has steps for.

    New entries can only be in a directory whose stat data changed (adding or removing an entry changes its mtime),
    so only those are listed again; a new directory is walked whole.
    """
    live, changed_dirs = _live_directories(base, copy_root, dirs)
    child: dict[str, Entry] = {}
    changed: list[str] = []
    _read_base_paths(base, copy_root, live, child, changed, helper=helper)
    rules = GitignoreRules(Path(copy_root))
    root = Path(copy_root)

    def found_new(path: str, leaf: Leaf | None) -> None:
        if leaf is not None:
            child[path] = leaf
            changed.append(path)

    for directory in changed_dirs:
        chain = rules.chain(directory)
        prefix = directory + "/" if directory else ""
        for entry in os.scandir(os.path.join(copy_root, directory)):
            path = prefix + entry.name
            if entry.name == GIT_DIR_NAME or path in live:
                continue  # .git is never the workspace's; a recorded directory is read on its own
            if entry.is_dir(follow_symlinks=False):
                if not ignored(chain, path + "/"):
                    for found, inside in walk_gitignored(root, start=path, rules=rules):
                        found_new(found, _leaf(base, found, inside.path, inside.stat(follow_symlinks=False), None))
            elif path in base.by_path:
                continue  # read above
            elif (entry.is_file(follow_symlinks=False) or entry.is_symlink()) and not ignored(chain, path):
                found_new(path, _leaf(base, path, entry.path, entry.stat(follow_symlinks=False), None))
    return child, changed


def read_parent(
    base: _Base, parent_root: str, paths: Iterable[str]
) -> tuple[dict[str, Entry], dict[str, StatFacts | None]]:
    """The parent's tree at `paths` (and the files in their way), and what lstat found at each."""
    looker = _Looker(parent_root)
    parent: dict[str, Entry] = {}
    seen: dict[str, StatFacts | None] = {}
    for path in sorted(paths, key=path_order):  # a path comes after the paths above it
        st, blocker = looker.look(path)
        if blocker is not None:
            parent.setdefault(blocker, File(PLACEHOLDER))
        seen[path] = None if st is None else stat_facts(st)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            parent[path] = Dir()
            continue
        copied = base.by_path.get(path)
        full_path = os.path.join(parent_root, path)
        leaf = _leaf(base, path, full_path, st, None if copied is None else unpacked_stat(copied.source))
        # A fifo, socket or device is the parent's own: it never reads as the base's, so it is never overwritten.
        parent[path] = leaf if leaf is not None else File(f"special:{st.st_mode:o}:{st.st_ino}")
    return parent, seen


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Hold the cyclic garbage collector while tens of thousands of acyclic records are made (it would walk them
    again and again for nothing); restore its state after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_facts(layout: WorkspaceLayout, record: CopyRecord) -> Facts:
    """The three trees at the paths the child changed: the base's (the record), the child's copy, and the parent's
    directory (with the files in those paths' way).

    Everywhere else the table keeps the parent's entry whatever it is (cow_keeps_parent), so no tree there decides
    anything, and the plan of these trees has the same steps as the plan of the whole ones (cow_plan_changed_only).
    """
    with contextlib.ExitStack() as stack:
        helper = None
        if helper_pays(len(record.paths)):  # started first: it starts while the record and directories are read
            argv = [*STAT_HELPER_ARGV, str(layout.copy), STAT_PACKING.format]
            helper = stack.enter_context(HelperProcess(argv, streams=True))
        base = _Base(str(layout.base), record.recorded_at_ns, {copied.path: copied for copied in record.paths})
        child, changed = read_child(base, str(layout.copy), record.dirs, helper=helper)
    base_tree: dict[str, Entry] = {}
    for path in changed:
        copied = base.by_path.get(path)
        if copied is not None:
            base_tree[path] = BASE_FILE if copied.link is None else Link(copied.link)
    parent_root = record.parent_dir
    if not os.path.isdir(parent_root):
        raise NotADirectoryError(errno.ENOTDIR, "the parent's directory is gone or not a directory", parent_root)
    parent, seen = read_parent(base, parent_root, changed)
    return Facts(base=base_tree, parent=parent, child=child, parent_seen=seen)
