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

`merge_entry` is the core's entry: a plain JSON request (the three trees) in, the encoded plan out, or one exact
typed refusal naming the first malformed field.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

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
        if isinstance(tree.get(above), File | Link):
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
    if isinstance(entry, File | Link):
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
    return frozenset(p for tree in (base, child) for p, entry in tree.items() if isinstance(entry, File | Link))


def split_changed(base: Tree, child: Tree) -> tuple[list[str], list[str]]:
    """The paths of the merge split in two: where the child kept the base's file or symlink (KEEP, whatever the
    parent holds), and where it changed it (the shell reads the parent only there)."""
    kept: list[str] = []
    changed: list[str] = []
    for path, entry in child.items():
        if isinstance(entry, File | Link):
            (kept if entry == base.get(path) else changed).append(path)
    for path, entry in base.items():
        if isinstance(entry, File | Link) and not isinstance(child.get(path), File | Link):
            changed.append(path)  # the child has no file or symlink there any more
    return kept, changed


def leaf_state(tree: Tree, path: str) -> State:
    """A base's or a child's state as the table reads it: only its file or symlink counts (`plan_path` looks at
    them through `leaf_of`), so a directory there or a file above reads as absent, which costs no tree walk."""
    entry = tree.get(path)
    return entry if isinstance(entry, File | Link) else Void.ABSENT


def path_order(path: str) -> str:
    """A sort key that puts every directory's paths right after it, parents before children ("a" < "a/b" < "a.b")."""
    return path.replace("/", "\0")


def plan(base: Tree, parent: Tree, child: Tree) -> HandbackPlan:
    """The hand-back plan: the table on every file or symlink of the base or the child, in a safe order.

    A path under a parent's file or symlink that this plan removes reads as absent (the removal runs first);
    under any other parent's file it cannot be held. Where the child kept the base's file or symlink, the verdict
    is KEEP whatever the parent holds, so those paths are settled without looking further.
    """

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


def stat_proves_same(recorded: StatFacts, now: StatFacts, recorded_at_ns: int) -> bool:
    """Stat data proves a file unchanged only if all of it matches and the file's recorded mtime is strictly older
    than the moment the record began (racy git: an edit in the same clock tick keeps mtime and ctime)."""
    return recorded == now and recorded.mtime_ns < recorded_at_ns


# ---------------------------------------------------------------------------------------------------------------------
# The entry (law `cow_entry`)

TREE_NAMES = ("base", "parent", "child")
"""The request's trees, in the order the entry reads them."""


@dataclass(frozen=True, slots=True)
class MergeReply:
    """The entry's answer: the encoded plan (its steps in order, and the kept paths sorted)."""

    steps: tuple[dict[str, Any], ...]
    kept: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"steps": [dict(step) for step in self.steps], "kept": list(self.kept)}


@dataclass(frozen=True, slots=True)
class MergeRefused:
    """The entry's one refusal: the request is malformed at `field` (the first offending field)."""

    field: str
    code: ClassVar[str] = "merge_request_malformed"


class _MalformedError(Exception):
    """Internal: a request field is not what the entry reads."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def valid_path(path: object) -> bool:
    """A relative POSIX path of names: no leading or trailing slash, no empty, `.` or `..` part, no NUL."""
    if not isinstance(path, str) or not path or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def encode_entry(entry: Entry | None) -> object:
    """An entry as the entry writes it: {"file": identity}, {"link": target}, "dir", or null for none."""
    if isinstance(entry, File):
        return {"file": entry.identity}
    if isinstance(entry, Link):
        return {"link": entry.target}
    if isinstance(entry, Dir):
        return "dir"
    return None


def decode_entry(value: object, field: str) -> Entry:
    """An entry from a request; raises _MalformedError naming `field`."""
    if value == "dir" and isinstance(value, str):
        return Dir()
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "file" and isinstance(inner, str):
            return File(inner)
        if key == "link" and isinstance(inner, str) and inner and "\0" not in inner:
            return Link(inner)
    raise _MalformedError(field)


def encode_tree(tree: Tree) -> dict[str, object]:
    """A tree as the request carries it."""
    return {path: encode_entry(entry) for path, entry in tree.items()}


def decode_tree(value: object, name: str) -> dict[str, Entry]:
    """A tree from a request; raises _MalformedError naming the first bad field (`name`, or `name[path]`)."""
    if not isinstance(value, dict):
        raise _MalformedError(name)
    tree: dict[str, Entry] = {}
    for path, raw in value.items():
        if not valid_path(path):
            raise _MalformedError(f"{name}[{path}]")
        tree[path] = decode_entry(raw, f"{name}[{path}]")
    for path in tree:
        if blocker_of(tree, path) is not None:
            raise _MalformedError(f"{name}[{path}]")  # under a file of the same tree: no disk holds that
    return tree


def encode_step(step: Step) -> dict[str, Any]:
    """A step as the entry answers it."""
    return {
        "path": step.path,
        "verdict": step.verdict.value,
        "child": encode_entry(step.child),
        "reason": None if step.reason is None else step.reason.value,
    }


def encode_plan(handback: HandbackPlan) -> MergeReply:
    """A plan as the entry answers it."""
    return MergeReply(tuple(encode_step(step) for step in handback.steps), tuple(sorted(handback.kept, key=path_order)))


def merge_request(base: Tree, parent: Tree, child: Tree) -> dict[str, object]:
    """The request the shell writes for three trees."""
    return {"base": encode_tree(base), "parent": encode_tree(parent), "child": encode_tree(child)}


def merge_entry(request: object) -> MergeReply | MergeRefused:
    """The core's merge entry: {"base", "parent", "child"} trees -> the encoded plan, or the first malformed field."""
    try:
        if not isinstance(request, dict) or set(request) != set(TREE_NAMES):
            raise _MalformedError("request")
        trees = [decode_tree(request[name], name) for name in TREE_NAMES]
    except _MalformedError as bad:
        return MergeRefused(bad.field)
    return encode_plan(plan(*trees))
