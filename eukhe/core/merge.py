"""The child workspace's hand-back plan (spec S3 "A subagent's workspace" 4-6; model `merge1`, `back`, `plan`).

Everything that decides what a hand-back does lives in this module, as data and total functions. The shell
(`eukhe.workspace.handback`) reads three trees (the base: the workspace as the child found it; the parent's directory
now; the child's copy now), asks `plan` and carries the steps out in order. It decides nothing itself.

Theory of operation:
- A tree maps a relative POSIX path to a `File` (its content identity, which the shell supplies: equal identities
  mean equal content and mode), a `Link` (its target) or a `Dir`. Directories are implied by the paths under them;
  the parent's tree also names a `Dir` where the shell found one at a path of the merge.
- One path's `State` in a tree is its file or symlink, or a `Void`: absent, a directory there, or under a file (a
  file or symlink sits where one of its directories goes). Only files and symlinks are merged; directories come and
  go with them (empty ones stay).
- `plan_path` is the spec's table on one path, keyed by three comparisons of the leaves (what is there as a file or
  symlink: `leaf_of`), and one fact: can the parent hold a file there.
- `plan` runs the table on every path that is a file or symlink in the base or the child. A path under a parent's
  file that the plan itself removes is read as absent: the removal runs first. The steps come in an order that is
  safe to carry out: removals, then writes (parents before children), then the conflicts, then the changed paths
  that need nothing done. The paths the child kept as the base had them (KEEP) are a set beside the steps.
- `apply_step` / `back` carry a plan out on a model tree; `merge1` is the copy-on-write rule stated on its own, and
  the laws check that `back(plan(...))` gives `merge1` on every path.

Idempotence (spec workspace 6): a path already taken reads as changed by both to the same content (`KEPT`), so a
hand-back cut by a crash, planned again from its partial result, ends at the same tree with the same conflicts.

Change detection (spec workspace) also decides here: `stat_proves_same` is the racy-git rule.

`plan` refuses a tree no disk holds (law `cow_entry`): a path that is not a relative POSIX path of names, an entry
that is not a `File`, `Link` or `Dir` (or a file identity that is not a string, a link with an empty target), or an
entry under a file or symlink of the same tree raise `TreeError`, naming the tree and the first wrong path.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

# ---------------------------------------------------------------------------------------------------------------------
# Trees and per-path states


@dataclass(frozen=True, slots=True)
class File:
    """A regular file; `identity` stands for its content and mode (equal identities: equal files)."""

    identity: str


@dataclass(frozen=True, slots=True)
class Link:
    """A symbolic link; compared by its target, never followed."""

    target: str


@dataclass(frozen=True, slots=True)
class Dir:
    """A directory the shell found at a path (directories are otherwise implied by the paths under them)."""


Leaf = File | Link
"""What a hand-back merges: a file or a symlink."""
_LEAVES = (File, Link)
"""`Leaf` for isinstance in the loops over whole trees (a tuple is faster there than the union)."""
Entry = File | Link | Dir
Tree = Mapping[str, Entry]
"""A tree: relative POSIX path -> entry. No entry sits under a file or symlink of the same tree."""


class Void(enum.Enum):
    """A path with no file or symlink of its own in a tree."""

    ABSENT = "absent"  # nothing there, and nothing in the way of making a file there
    DIR = "dir"  # a directory sits at the path
    UNDER = "under"  # a file or symlink sits where one of the path's directories goes


State = File | Link | Void
"""One path's state in one tree."""


def leaf_of(state: State) -> Leaf | None:
    """The file or symlink at a path, or None: what a merge compares."""
    return None if isinstance(state, Void) else state


def ancestors(path: str) -> Iterable[str]:
    """The proper ancestors of a path, outermost first: "a/b/c" -> "a", "a/b"."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        yield "/".join(parts[:depth])


def blocker_of(tree: Tree, path: str) -> str | None:
    """The file or symlink of `tree` that sits where one of `path`'s directories goes (the outermost), if any."""
    for above in ancestors(path):
        if isinstance(tree.get(above), _LEAVES):
            return above
    return None


def implied_dirs(tree: Tree) -> frozenset[str]:
    """Every directory a tree holds: the ancestors of its paths and its `Dir` entries."""
    dirs = {path for path, entry in tree.items() if isinstance(entry, Dir)}
    above: set[str] = set()
    for path in tree:
        head = path.rpartition("/")[0]
        while head and head not in above:  # a directory seen once has had its own ancestors added
            above.add(head)
            head = head.rpartition("/")[0]
    return frozenset(dirs | above)


def state_of(tree: Tree, path: str, dirs: frozenset[str] | None = None) -> State:
    """A path's state in a tree (`dirs`: the tree's `implied_dirs`, passed in when asking about many paths)."""
    entry = tree.get(path)
    if isinstance(entry, _LEAVES):
        return entry
    if blocker_of(tree, path) is not None:
        return Void.UNDER
    if isinstance(entry, Dir) or path in (implied_dirs(tree) if dirs is None else dirs):
        return Void.DIR
    return Void.ABSENT


# ---------------------------------------------------------------------------------------------------------------------
# One path: the spec's table


class Verdict(enum.Enum):
    """What the hand-back does with one path (spec workspace 4, the table)."""

    KEEP = "keep"  # the child did not change it: the parent's entry stays
    TAKE = "take"  # only the child changed it: the parent gets the child's file or symlink, or loses its own
    KEPT = "kept"  # both changed it to the same content: nothing to do
    CONFLICT = "conflict"  # both changed it differently: the parent's stays, the child's version goes to conflicts/
    BLOCKED = "blocked"  # the parent cannot hold the child's file there: the parent's stays, the child's to conflicts/


REPORTED = frozenset({Verdict.CONFLICT, Verdict.BLOCKED})
"""The verdicts the report lists as conflicts."""


class Reason(enum.Enum):
    """Why a path is a conflict, as the report names it."""

    BOTH_CHANGED = "both_changed"  # the parent and the child changed it to different contents
    PARENT_HOLDS_DIRECTORY = "parent_holds_directory"  # the parent has a directory where the child has a file
    PARENT_HOLDS_FILE_ABOVE = "parent_holds_file_above"  # the parent has a file or symlink where its directory goes


def reason_for(verdict: Verdict, parent: State) -> Reason | None:
    """The reason a reported verdict gives (None for the others)."""
    if verdict is Verdict.CONFLICT:
        return Reason.BOTH_CHANGED
    if verdict is Verdict.BLOCKED:
        return Reason.PARENT_HOLDS_DIRECTORY if parent is Void.DIR else Reason.PARENT_HOLDS_FILE_ABOVE
    return None


def can_hold(parent: State) -> bool:
    """Whether the parent can take a file or symlink at a path: not where a directory is, nor under a file."""
    return parent not in (Void.DIR, Void.UNDER)


def plan_path(base: State, parent: State, child: State) -> Verdict:
    """The spec's table on one path; `parent` is its state when the step runs (after the plan's earlier removals).

    | child vs base | parent vs base | parent vs child | parent can hold | verdict  |
    | same          | any            | any             | any             | KEEP     |
    | changed       | any            | same            | any             | KEPT     |
    | changed (to a file or symlink) | any | different  | no              | BLOCKED  |
    | changed       | same           | different       | yes (or removal)| TAKE     |
    | changed       | changed        | different       | yes (or removal)| CONFLICT |
    """
    b, p, c = leaf_of(base), leaf_of(parent), leaf_of(child)
    if c == b:
        return Verdict.KEEP
    if p == c:
        return Verdict.KEPT
    if c is not None and not can_hold(parent):
        return Verdict.BLOCKED
    if p == b:
        return Verdict.TAKE
    return Verdict.CONFLICT


def merge1(base: State, parent: State, child: State) -> Leaf | None:
    """The copy-on-write rule on one path, on its own terms: the file or symlink the parent holds after the merge.

    The child's version wins only where the child alone changed the path and the parent can hold it; everywhere
    else the parent's stays (unchanged by the child, changed alike by both, or a conflict).
    """
    b, p, c = leaf_of(base), leaf_of(parent), leaf_of(child)
    only_child_changed = c != b and p == b
    if only_child_changed and (c is None or can_hold(parent)):
        return c
    return p


# ---------------------------------------------------------------------------------------------------------------------
# A whole hand-back


@dataclass(frozen=True, slots=True)
class Step:
    """One path's verdict, with the child's file or symlink there (None: the child has none, e.g. a removal), and for
    a conflict, its reason."""

    path: str
    verdict: Verdict
    child: Leaf | None
    reason: Reason | None = None

    @property
    def removes(self) -> bool:
        """The step removes the parent's file or symlink."""
        return self.verdict is Verdict.TAKE and self.child is None

    @property
    def writes(self) -> bool:
        """The step writes the child's file or symlink into the parent."""
        return self.verdict is Verdict.TAKE and self.child is not None

    @property
    def saves_conflict(self) -> bool:
        """The step puts the child's version into conflicts/ (a child's removal has no version to save)."""
        return self.verdict in REPORTED and self.child is not None


@dataclass(frozen=True, slots=True)
class HandbackPlan:
    """A verdict for every path of a merge: a step for each path the child changed, in an order that is safe to
    carry out, and the paths the child kept as the base had them (KEEP: the parent's entry stays, nothing to do).

    KEEP is the verdict for most paths of most hand-backs; it needs no step, so it is a set, not 10,000 steps.
    """

    steps: tuple[Step, ...]
    kept: frozenset[str] = frozenset()

    def verdict(self, path: str) -> Verdict | None:
        """The verdict on one path (None: not a path of this merge)."""
        if path in self.kept:
            return Verdict.KEEP
        return next((s.verdict for s in self.steps if s.path == path), None)

    def taken(self) -> tuple[str, ...]:
        """The paths whose child change is in the parent once the plan ran: taken now, or found there already.

        A rerun after a crash sees the paths the first run took as KEPT, so this set is the same for both runs.
        """
        return tuple(sorted(s.path for s in self.steps if s.verdict in (Verdict.TAKE, Verdict.KEPT)))

    def removed(self) -> tuple[str, ...]:
        """The taken paths that are removals."""
        return tuple(
            sorted(s.path for s in self.steps if s.verdict in (Verdict.TAKE, Verdict.KEPT) and s.child is None)
        )

    def conflicts(self) -> tuple[Step, ...]:
        """The reported conflicts, by path."""
        return tuple(sorted((s for s in self.steps if s.verdict in REPORTED), key=lambda s: s.path))


class Phase(enum.IntEnum):
    """The order in which a plan's steps run; each phase only needs the ones before it."""

    REMOVE = 0  # removals first: a file may stand where a written path's directory goes
    WRITE = 1  # then writes, parents before children
    SAVE = 2  # then the child's versions of the conflicts, into conflicts/
    NOTHING = 3  # the changed paths that need nothing done last (KEPT, a conflict with a child's removal)


def phase_of(step: Step) -> Phase:
    """Which phase a step runs in."""
    if step.removes:
        return Phase.REMOVE
    if step.writes:
        return Phase.WRITE
    if step.saves_conflict:
        return Phase.SAVE
    return Phase.NOTHING


def merge_paths(base: Tree, child: Tree) -> frozenset[str]:
    """The paths a hand-back decides on: every file or symlink of the base or the child."""
    return frozenset(p for tree in (base, child) for p, entry in tree.items() if isinstance(entry, _LEAVES))


def split_changed(base: Tree, child: Tree) -> tuple[list[str], list[str]]:
    """The paths of the merge split in two: where the child kept the base's file or symlink (KEEP, whatever the
    parent holds), and where it changed it (the shell reads the parent only there)."""
    kept: list[str] = []
    changed: list[str] = []
    in_base, in_child = base.get, child.get
    for path, entry in child.items():
        if isinstance(entry, _LEAVES):
            was = in_base(path)
            (kept if entry is was or entry == was else changed).append(path)
    for path, entry in base.items():
        if isinstance(entry, _LEAVES) and not isinstance(in_child(path), _LEAVES):
            changed.append(path)  # the child has no file or symlink there any more
    return kept, changed


def leaf_state(tree: Tree, path: str) -> State:
    """A base's or a child's state as the table reads it: only its file or symlink counts (`plan_path` looks at
    them through `leaf_of`), so a directory there or a file above reads as absent, which costs no tree walk."""
    entry = tree.get(path)
    return entry if isinstance(entry, _LEAVES) else Void.ABSENT


def path_order(path: str) -> str:
    """A sort key that puts every directory's paths right after it, parents before children ("a" < "a/b" < "a.b")."""
    return path.replace("/", "\0")


class TreeError(ValueError):
    """A tree no disk holds (law `cow_entry`): `tree` names it ("base", "parent", "child"), `path` the first wrong
    path in it (None: the tree is not a mapping)."""

    def __init__(self, tree: str, path: str | None) -> None:
        super().__init__(f"{tree} tree: not a tree a disk holds" + ("" if path is None else f" at {path!r}"))
        self.tree = tree
        self.path = path


def valid_path(path: object) -> bool:
    """A relative POSIX path of names: no leading or trailing slash, no empty, `.` or `..` part, no NUL."""
    if not isinstance(path, str) or "\0" in path:
        return False
    wrapped = f"/{path}/"  # every part between slashes: an empty, `.` or `..` one shows as one of these
    return "//" not in wrapped and "/./" not in wrapped and "/../" not in wrapped


def all_valid_paths(paths: Iterable[object]) -> bool:
    """Whether every one of `paths` is a `valid_path`, in one scan of their join (a tree has thousands).

    Each path shows as `/<path>/` in the join, and the separators add only newlines between such pieces: an empty,
    `.` or `..` part (or a NUL) of any path shows in the join, and what the join shows lies within one path's piece.
    """
    listed = list(paths)
    if not listed:
        return True
    try:
        joined = "/" + "/\n/".join(listed) + "/"  # type: ignore[arg-type]  # a non-string raises TypeError
    except TypeError:
        return False
    return "\0" not in joined and "//" not in joined and "/./" not in joined and "/../" not in joined


def _valid_entry(entry: object) -> bool:
    if isinstance(entry, File):
        return isinstance(entry.identity, str)
    if isinstance(entry, Link):
        return isinstance(entry.target, str) and bool(entry.target) and "\0" not in entry.target
    return isinstance(entry, Dir)


_NOTHING_CHECKED = object()


def tree_error(name: str, tree: object) -> TreeError | None:
    """Why `tree` is no tree a disk holds, naming its first wrong path; None for a tree `plan` may take."""
    if not isinstance(tree, Mapping):
        return TreeError(name, None)
    paths_checked = all_valid_paths(tree)  # the common case, in one scan; else path by path, to name the first
    checked: object = _NOTHING_CHECKED  # the entry last found valid: trees share one `File` for unchanged files
    for path, entry in tree.items():
        if (not paths_checked and not valid_path(path)) or (entry is not checked and not _valid_entry(entry)):
            return TreeError(name, path)
        checked = entry
    under = _first_under_a_leaf(tree)
    return None if under is None else TreeError(name, under)


def _first_under_a_leaf(tree: Tree) -> str | None:
    """The first path of the tree under one of its files or symlinks, if any (a disk holds none)."""
    above: set[str] = set()  # every proper ancestor of a path of the tree
    for own_dir in {path.rpartition("/")[0] for path in tree}:  # the paths' own directories, each once
        head = own_dir
        while head and head not in above:  # a directory seen once has had its own ancestors added
            above.add(head)
            head = head.rpartition("/")[0]
    if not any(isinstance(tree[head], _LEAVES) for head in above.intersection(tree)):
        return None
    return next(path for path in tree if blocker_of(tree, path) is not None)


def plan(base: Tree, parent: Tree, child: Tree) -> HandbackPlan:
    """The hand-back plan: the table on every file or symlink of the base or the child, in a safe order.

    A path under a parent's file or symlink that this plan removes reads as absent (the removal runs first);
    under any other parent's file it cannot be held. Where the child kept the base's file or symlink, the verdict
    is KEEP whatever the parent holds, so those paths are settled without looking further. A tree no disk holds
    raises its `TreeError` (base first, then parent, then child).
    """
    for name, tree in (("base", base), ("parent", parent), ("child", child)):
        error = tree_error(name, tree)
        if error is not None:
            raise error

    def changed_step(path: str, parent_state: State) -> Step:
        child_state = leaf_state(child, path)
        verdict = plan_path(leaf_state(base, path), parent_state, child_state)
        return Step(path, verdict, leaf_of(child_state), reason_for(verdict, parent_state))

    kept, changed = split_changed(base, child)
    parent_dirs = implied_dirs(parent) if changed else frozenset()
    first = {path: changed_step(path, state_of(parent, path, parent_dirs)) for path in changed}
    steps: list[Step] = []
    for path, step in first.items():
        blocker = blocker_of(parent, path)
        freed = blocker is not None and blocker in first and first[blocker].removes
        steps.append(changed_step(path, Void.ABSENT) if freed else step)  # the blocker goes first: the path is free
    steps.sort(key=lambda s: (phase_of(s), path_order(s.path)))
    return HandbackPlan(tuple(steps), frozenset(kept))


def apply_step(tree: Tree, step: Step) -> dict[str, Entry]:
    """One step carried out on a model of the parent's tree (only TAKE changes it)."""
    result = dict(tree)
    if step.verdict is not Verdict.TAKE:
        return result
    if step.child is None:
        result.pop(step.path, None)
        for above in ancestors(step.path):  # directories stay when their files go (empty ones too)
            result.setdefault(above, Dir())
        return result
    for above in ancestors(step.path):
        if isinstance(result.get(above), File | Link):
            raise ValueError(f"{step.path}: a file stands where its directory goes")  # an unsafe order
    result[step.path] = step.child
    return result


def back(handback: HandbackPlan, parent: Tree) -> dict[str, Entry]:
    """The parent's tree after the plan ran, step by step in its order."""
    result = dict(parent)
    for step in handback.steps:
        result = apply_step(result, step)
    return result


def conflicts_tree(handback: HandbackPlan) -> dict[str, Entry]:
    """What conflicts/ holds once the plan ran: the child's version of each conflict, under its own path."""
    return {s.path: s.child for s in handback.steps if s.saves_conflict and s.child is not None}


# ---------------------------------------------------------------------------------------------------------------------
# Change detection: the racy-git rule


class StatFacts(NamedTuple):
    """What lstat says of a file, as far as change detection reads it (a tuple: thousands are compared per run)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    mode: int


def stat_proves_same(recorded: StatFacts, now: tuple[int, int, int, int, int], recorded_at_ns: int) -> bool:
    """Stat data proves a file unchanged only if all of it matches and the file's recorded mtime is strictly older
    than the moment the record began (racy git: an edit in the same clock tick keeps mtime and ctime). `now` is a
    `StatFacts` or the plain tuple of the same fields (the shell's hot loop makes no record per file)."""
    return recorded == now and stat_trusted(recorded.mtime_ns, recorded_at_ns)


def stat_trusted(recorded_mtime_ns: int, recorded_at_ns: int) -> bool:
    """Whether equal stat data can prove a file unchanged: its recorded mtime is strictly older than the moment the
    record began (an edit in the record's clock tick keeps mtime and ctime)."""
    return recorded_mtime_ns < recorded_at_ns


STAT_PACKING = struct.Struct("<QqqQQ")
"""`StatFacts` as 40 bytes (size, mtime_ns, ctime_ns, inode, mode; the times signed): one-to-one on what lstat
gives, so equal bytes mean equal stat data. The spawn's record holds each file's facts this way: a hand-back
compares 10,000 of them without making 50,000 ints."""


def packed_stat(facts: tuple[int, int, int, int, int]) -> bytes:
    """A file's stat data as the record holds them."""
    return STAT_PACKING.pack(*facts)


def unpacked_stat(data: bytes) -> StatFacts:
    """The stat data a record's 40 bytes hold."""
    return StatFacts._make(STAT_PACKING.unpack(data))


def all_stats_trusted(packed: bytes, recorded_at_ns: int) -> bool:
    """Whether every one of the packed stat data laid end to end (`STAT_PACKING`) is `stat_trusted`: one look at
    all the recorded mtimes, not one call per file."""
    if not packed:
        return True
    mtimes = memoryview(packed).cast("q")[1 :: len(StatFacts._fields)]  # every field is 8 bytes; mtime_ns is second
    return stat_trusted(max(mtimes), recorded_at_ns)
