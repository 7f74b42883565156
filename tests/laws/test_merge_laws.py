"""Laws of the hand-back plan (spec S3 "A subagent's workspace" 4-6, the cow_* laws), over `eukhe.core.merge`.

Every input is free: any base, parent and child workspaces. Each law is checked three ways: exhaustively over the
per-path state space (absent, file A, file B, a symlink, a directory, under a file; base x parent x child: 216
cases), exhaustively over every triple of tiny trees on the paths `a` and `a/b` (13 trees each, 2197 triples: this
reaches directories, files under files and a removal that frees a path), and with Hypothesis over small whole trees.
The last section breaks the core on purpose, once per law family, and checks the family catches it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import merge
from eukhe.core.merge import (
    REPORTED,
    Dir,
    Entry,
    File,
    HandbackPlan,
    Link,
    Phase,
    State,
    StatFacts,
    Tree,
    TreeError,
    Verdict,
    Void,
    leaf_of,
    merge1,
    phase_of,
    state_of,
)

# ---------------------------------------------------------------------------------------------------------------------
# Domains

A, B = File("A"), File("B")
LINK = Link("target")
STATES: tuple[State, ...] = (Void.ABSENT, A, B, LINK, Void.DIR, Void.UNDER)
TRIPLES = list(itertools.product(STATES, repeat=3))  # base x parent x child: 216


def tiny_trees() -> list[dict[str, Entry]]:
    """Every valid tree on the paths `a` and `a/b` (13): each is none, file A, file B, a symlink or a directory."""
    choices: tuple[Entry | None, ...] = (None, A, B, LINK, Dir())
    trees = []
    for top, below in itertools.product(choices, repeat=2):
        if isinstance(top, File | Link) and below is not None:
            continue  # nothing sits under a file
        tree = {path: entry for path, entry in (("a", top), ("a/b", below)) if entry is not None}
        trees.append(tree)
    return trees


TINY = tiny_trees()
TINY_TRIPLES = list(itertools.product(TINY, repeat=3))

NAMES = ("a", "b", "c")
PATHS = ["/".join(parts) for depth in (1, 2, 3) for parts in itertools.product(NAMES, repeat=depth)]
entries = st.sampled_from([File("A"), File("B"), File("C"), Link("x"), Link("y"), Dir()])


def normalized(raw: dict[str, Entry | None]) -> dict[str, Entry]:
    """A valid tree from any mapping: drop removals, then whatever sits under a file or symlink."""
    tree = {path: entry for path, entry in raw.items() if entry is not None}
    return {path: entry for path, entry in tree.items() if merge.blocker_of(tree, path) is None}


trees = st.dictionaries(st.sampled_from(PATHS), entries, max_size=8).map(normalized)


@st.composite
def tree_triples(draw: st.DrawFn) -> tuple[dict[str, Entry], dict[str, Entry], dict[str, Entry]]:
    """A base, and a parent and a child that are edits of it (or, now and then, unrelated trees)."""
    base = draw(trees)
    edits = st.dictionaries(st.sampled_from(PATHS), st.none() | entries, max_size=5)

    def edited() -> dict[str, Entry]:
        if draw(st.booleans()) and draw(st.booleans()):
            return draw(trees)
        # An edit replaces paths outright: drop what sits under a new file, and what a new path sits under.
        changes = draw(edits)
        raw: dict[str, Entry | None] = {**base}
        for path, entry in changes.items():
            for existing in list(raw):
                related = existing.startswith(path + "/") or path.startswith(existing + "/")
                if related and entry is not None and isinstance(raw[existing], File | Link | None):
                    raw[existing] = None
            raw[path] = entry
        return normalized(raw)

    return base, edited(), edited()


# ---------------------------------------------------------------------------------------------------------------------
# The spec's rules, written out by the laws (independently of the table)


def changed(before: State, after: State) -> bool:
    return leaf_of(before) != leaf_of(after)


def effective_parent(base: Tree, parent: Tree, child: Tree, path: str) -> State:
    """The parent's state at `path` when its step runs: under a parent's file that the child's removal frees, absent."""
    state = state_of(parent, path)
    blocker = merge.blocker_of(parent, path)
    if state is Void.UNDER and blocker is not None:
        at = (state_of(base, blocker), state_of(parent, blocker), state_of(child, blocker))
        if merge1(*at) is None:
            return Void.ABSENT
    return state


def states_at(base: Tree, parent: Tree, child: Tree, path: str) -> tuple[State, State, State]:
    return state_of(base, path), effective_parent(base, parent, child, path), state_of(child, path)


def reported_paths(handback: HandbackPlan) -> set[str]:
    return {s.path for s in handback.conflicts()}


# ---------------------------------------------------------------------------------------------------------------------
# The per-path laws, exhaustive over the state space


def check_keeps_parent(base: State, parent: State, child: State) -> None:
    if not changed(base, child):
        assert merge.plan_path(base, parent, child) is Verdict.KEEP, (base, parent, child)
        assert merge1(base, parent, child) == leaf_of(parent)


def check_takes_child(base: State, parent: State, child: State) -> None:
    if changed(base, child) and not changed(base, parent) and (leaf_of(child) is None or merge.can_hold(parent)):
        assert merge.plan_path(base, parent, child) is Verdict.TAKE, (base, parent, child)
        assert merge1(base, parent, child) == leaf_of(child)


def check_conflict_reported(base: State, parent: State, child: State) -> None:
    verdict = merge.plan_path(base, parent, child)
    if changed(base, child) and changed(base, parent) and changed(parent, child):
        assert verdict in REPORTED, (base, parent, child)
        assert merge1(base, parent, child) == leaf_of(parent)
    if changed(base, child) and leaf_of(child) is not None and not merge.can_hold(parent):
        assert verdict is Verdict.BLOCKED, (base, parent, child)  # a directory there, or a file above it
        assert merge1(base, parent, child) == leaf_of(parent)
    if changed(base, child):  # no silent loss: a child's change is in the parent, or reported
        assert verdict in {Verdict.TAKE, Verdict.KEPT} | REPORTED, (base, parent, child)
        if verdict not in REPORTED:
            assert merge1(base, parent, child) == leaf_of(child)


def check_conflict_is_real(base: State, parent: State, child: State) -> None:
    verdict = merge.plan_path(base, parent, child)
    if verdict is Verdict.CONFLICT:
        assert changed(base, child) and changed(base, parent) and changed(parent, child), (base, parent, child)
    if verdict is Verdict.BLOCKED:
        assert changed(base, child) and leaf_of(child) is not None and not merge.can_hold(parent)
    if verdict in REPORTED:
        assert merge1(base, parent, child) != leaf_of(child)


PER_PATH_LAWS = {
    "cow_keeps_parent": check_keeps_parent,
    "cow_takes_child": check_takes_child,
    "cow_conflict_reported": check_conflict_reported,
    "cow_conflict_is_real": check_conflict_is_real,
}


def test_cow_keeps_parent_exhaustively() -> None:
    for triple in TRIPLES:
        check_keeps_parent(*triple)


def test_cow_takes_child_exhaustively() -> None:
    for triple in TRIPLES:
        check_takes_child(*triple)


def test_cow_conflict_reported_exhaustively() -> None:
    for triple in TRIPLES:
        check_conflict_reported(*triple)


def test_cow_conflict_is_real_exhaustively() -> None:
    for triple in TRIPLES:
        check_conflict_is_real(*triple)


def test_the_per_path_table_reaches_every_verdict() -> None:
    """The state space is not vacuous: every verdict occurs, and both kinds of BLOCKED."""
    seen = {merge.plan_path(*t) for t in TRIPLES}
    assert seen == set(Verdict)
    blocked = {t[1] for t in TRIPLES if merge.plan_path(*t) is Verdict.BLOCKED}
    assert blocked == {Void.DIR, Void.UNDER}


def test_the_per_path_table_anchors() -> None:
    """A few rows of the spec's table, by name."""
    assert merge.plan_path(A, A, A) is Verdict.KEEP
    assert merge.plan_path(A, B, A) is Verdict.KEEP
    assert merge.plan_path(A, A, B) is Verdict.TAKE
    assert merge.plan_path(A, A, Void.ABSENT) is Verdict.TAKE  # a removal
    assert merge.plan_path(Void.ABSENT, Void.ABSENT, A) is Verdict.TAKE  # a new file
    assert merge.plan_path(A, B, B) is Verdict.KEPT
    assert merge.plan_path(A, Void.ABSENT, Void.ABSENT) is Verdict.KEPT  # both removed it
    assert merge.plan_path(A, B, LINK) is Verdict.CONFLICT
    assert merge.plan_path(A, B, Void.ABSENT) is Verdict.CONFLICT  # child removed what the parent changed
    assert merge.plan_path(Void.ABSENT, Void.DIR, A) is Verdict.BLOCKED
    assert merge.plan_path(A, Void.UNDER, B) is Verdict.BLOCKED
    assert merge.plan_path(A, Void.DIR, Void.ABSENT) is Verdict.KEPT


# ---------------------------------------------------------------------------------------------------------------------
# The tree laws: cow_plan, cow_plan_is_merge, idempotence


def expected_reason(verdict: Verdict, parent: State) -> merge.Reason | None:
    if verdict is Verdict.CONFLICT:
        return merge.Reason.BOTH_CHANGED
    if verdict is Verdict.BLOCKED and parent is Void.DIR:
        return merge.Reason.PARENT_HOLDS_DIRECTORY
    if verdict is Verdict.BLOCKED:
        assert parent is Void.UNDER
        return merge.Reason.PARENT_HOLDS_FILE_ABOVE
    return None


def check_plan(base: Tree, parent: Tree, child: Tree) -> None:
    """cow_plan: every path of the merge once; each step is the table on the path's states when it runs; safe order."""
    handback = merge.plan(base, parent, child)
    paths = [s.path for s in handback.steps]
    assert len(paths) == len(set(paths))
    assert not set(paths) & handback.kept
    assert set(paths) | handback.kept == merge.merge_paths(base, child)
    for path in handback.kept:
        assert merge.plan_path(*states_at(base, parent, child, path)) is Verdict.KEEP, path
    assert Verdict.KEEP not in {s.verdict for s in handback.steps}
    phases = [phase_of(s) for s in handback.steps]
    assert phases == sorted(phases)
    for phase in Phase:  # within a phase, parents before children
        paths_in_phase = [s.path for s in handback.steps if phase_of(s) is phase]
        assert paths_in_phase == sorted(paths_in_phase, key=lambda p: p.split("/"))
    now: Tree = dict(parent)
    for step in handback.steps:
        at = (state_of(base, step.path), state_of(now, step.path), state_of(child, step.path))
        assert step.verdict is merge.plan_path(*at), (step, at)
        assert step.child == leaf_of(at[2])
        assert step.reason == expected_reason(step.verdict, at[1])
        now = merge.apply_step(now, step)  # raises on an unsafe order (a write under a file)


def check_plan_is_merge(base: Tree, parent: Tree, child: Tree) -> None:
    """cow_plan_is_merge: the plan carried out gives merge1 on every path; the child's changes are in or reported."""
    handback = merge.plan(base, parent, child)
    after = merge.back(handback, parent)
    saved = merge.conflicts_tree(handback)
    reported = reported_paths(handback)
    for path in merge.merge_paths(base, child):
        b, p, c = states_at(base, parent, child, path)
        assert leaf_of(state_of(after, path)) == merge1(b, p, c), path
        if changed(b, c):  # no silent loss
            got = leaf_of(state_of(after, path))
            assert got == leaf_of(c) or (path in reported and saved.get(path) == leaf_of(c)), path
        if path in reported:  # a real conflict: the parent's content stays, and it is not the child's
            assert changed(b, c)
            assert leaf_of(state_of(after, path)) == leaf_of(p) != leaf_of(c)
    for path, entry in parent.items():  # the rest of the parent is untouched
        if path not in merge.merge_paths(base, child) and isinstance(entry, File | Link):
            assert after.get(path) == entry


def partial_runs(handback: HandbackPlan, parent: Tree) -> Iterator[Tree]:
    """The parent's tree after each prefix of the plan's steps: where a crash can leave it."""
    now: Tree = dict(parent)
    yield now
    for step in handback.steps:
        if step.verdict is Verdict.TAKE:
            now = merge.apply_step(now, step)
            yield now


def check_idempotent(base: Tree, parent: Tree, child: Tree) -> None:
    """A path already taken reads as changed by both to the same content: a rerun after any prefix (a crash) ends at
    the same tree, with the same paths taken, the same conflicts and the same versions in conflicts/; on the full
    result the rerun changes nothing."""
    handback = merge.plan(base, parent, child)
    final = merge.back(handback, parent)
    for partial in partial_runs(handback, parent):
        again = merge.plan(base, partial, child)
        assert merge.back(again, partial) == final
        assert again.taken() == handback.taken()
        assert again.removed() == handback.removed()
        assert again.conflicts() == handback.conflicts()
        assert merge.conflicts_tree(again) == merge.conflicts_tree(handback)
    rerun = merge.plan(base, final, child)
    assert {s.verdict for s in rerun.steps} <= {Verdict.KEPT} | REPORTED
    assert merge.back(rerun, final) == final


def changed_only(tree: Tree, changed: list[str]) -> dict[str, Entry]:
    """A tree at the given paths only (what the shell reads of the base and the child)."""
    return {path: tree[path] for path in changed if isinstance(tree.get(path), File | Link)}


def check_plan_changed_only(base: Tree, parent: Tree, child: Tree) -> None:
    """The plan of the base and the child at the paths the child changed has the whole plan's steps."""
    leaves = {path for tree in (base, child) for path, entry in tree.items() if isinstance(entry, File | Link)}
    changed = [path for path in leaves if merge.leaf_state(base, path) != merge.leaf_state(child, path)]
    whole = merge.plan(base, parent, child)
    assert merge.plan(changed_only(base, changed), parent, changed_only(child, changed)).steps == whole.steps


TREE_LAWS: dict[str, Callable[[Tree, Tree, Tree], None]] = {
    "cow_plan": check_plan,
    "cow_plan_is_merge": check_plan_is_merge,
    "idempotent": check_idempotent,
}


def test_cow_plan_exhaustively_over_tiny_trees() -> None:
    for triple in TINY_TRIPLES:
        check_plan(*triple)


def test_cow_plan_is_merge_exhaustively_over_tiny_trees() -> None:
    for triple in TINY_TRIPLES:
        check_plan_is_merge(*triple)


def test_cow_plan_changed_only_exhaustively_over_tiny_trees() -> None:
    for triple in TINY_TRIPLES:
        check_plan_changed_only(*triple)


@given(tree_triples())
def test_cow_plan_changed_only_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_plan_changed_only(*triple)


def test_cow_plan_changed_only_catches_a_plan_that_reads_a_kept_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: the plan gives a step to a path the child kept, so the trees the shell reads plan fewer steps."""
    real_split = merge.split_changed

    def split_keeping_nothing(base: Tree, child: Tree) -> tuple[list[str], list[str]]:
        kept, changed = real_split(base, child)
        return [], changed + kept

    monkeypatch.setattr(merge, "split_changed", split_keeping_nothing)
    with pytest.raises(AssertionError):
        test_cow_plan_changed_only_exhaustively_over_tiny_trees()


def test_the_plan_is_idempotent_exhaustively_over_tiny_trees() -> None:
    for triple in TINY_TRIPLES:
        check_idempotent(*triple)


@given(tree_triples())
def test_cow_plan_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_plan(*triple)


@given(tree_triples())
def test_cow_plan_is_merge_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_plan_is_merge(*triple)


@given(tree_triples())
def test_the_plan_is_idempotent_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_idempotent(*triple)


def check_per_path_law_over_tree(name: str, base: Tree, parent: Tree, child: Tree) -> None:
    """A per-path law on every path of whole trees, at the states each path has when its step runs."""
    handback = merge.plan(base, parent, child)
    verdicts = {s.path: s.verdict for s in handback.steps} | dict.fromkeys(handback.kept, Verdict.KEEP)
    for path, verdict in verdicts.items():
        at = states_at(base, parent, child, path)
        assert verdict is merge.plan_path(*at)
        PER_PATH_LAWS[name](*at)


@given(tree_triples())
def test_cow_keeps_parent_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_per_path_law_over_tree("cow_keeps_parent", *triple)


@given(tree_triples())
def test_cow_takes_child_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_per_path_law_over_tree("cow_takes_child", *triple)


@given(tree_triples())
def test_cow_conflict_reported_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_per_path_law_over_tree("cow_conflict_reported", *triple)


@given(tree_triples())
def test_cow_conflict_is_real_over_trees(triple: tuple[Tree, Tree, Tree]) -> None:
    check_per_path_law_over_tree("cow_conflict_is_real", *triple)


def test_the_tiny_trees_reach_every_verdict_and_a_freed_path() -> None:
    """The tiny domain is not vacuous: every verdict, and a write under a parent's file that the plan removes."""
    seen: set[Verdict] = set()
    freed = False
    for base, parent, child in TINY_TRIPLES:
        handback = merge.plan(base, parent, child)
        seen |= {s.verdict for s in handback.steps} | ({Verdict.KEEP} if handback.kept else set())
        freed |= any(s.writes and state_of(parent, s.path) is Void.UNDER for s in handback.steps)
    assert seen == set(Verdict)
    assert freed


def test_a_file_replaced_by_a_directory_is_taken_in_order() -> None:
    """The child turned file `a` into a directory with `a/b`: remove `a` first, then write `a/b`."""
    handback = merge.plan({"a": A}, {"a": A}, {"a/b": B})
    assert [(s.path, s.verdict, s.child) for s in handback.steps] == [
        ("a", Verdict.TAKE, None),
        ("a/b", Verdict.TAKE, B),
    ]
    assert handback.taken() == ("a", "a/b")
    assert handback.removed() == ("a",)
    assert merge.back(handback, {"a": A}) == {"a/b": B}


def test_a_directory_the_parent_holds_blocks_a_childs_file() -> None:
    handback = merge.plan({"a/x": A}, {"a/x": A}, {"a": B})
    assert [(s.path, s.verdict) for s in handback.steps] == [("a/x", Verdict.TAKE), ("a", Verdict.BLOCKED)]
    assert merge.conflicts_tree(handback) == {"a": B}
    assert merge.back(handback, {"a/x": A}) == {"a": Dir()}  # the emptied directory stays


# ---------------------------------------------------------------------------------------------------------------------
# Change detection: the racy-git rule

STATS = [StatFacts(s, m, c, i, 0o100644) for s, m, c, i in itertools.product((1, 2), (5, 9), (5, 9), (7, 8))]


def test_stat_proves_same_only_on_equal_stats_older_than_the_record() -> None:
    for recorded, now, at in itertools.product(STATS, STATS, (5, 9, 10)):
        proves = merge.stat_proves_same(recorded, now, at)
        assert proves == (recorded == now and recorded.mtime_ns < at)
    assert not merge.stat_proves_same(STATS[0], STATS[0], STATS[0].mtime_ns)  # racy: same tick as the record


def test_stat_proves_same_on_packed_stats_as_on_stats() -> None:
    """The shell's hot loop compares packed stat data and checks the record's mtime once for all files: that is
    `stat_proves_same` exactly (packing is one-to-one), on every pair of a small domain."""
    for recorded, now, at in itertools.product(STATS, STATS, (5, 9, 10)):
        packed_same = merge.packed_stat(recorded) == merge.packed_stat(now)
        assert (packed_same and merge.stat_trusted(recorded.mtime_ns, at)) == merge.stat_proves_same(recorded, now, at)


def test_stat_proves_same_trusts_all_packed_stats_as_each_one() -> None:
    for size in range(4):
        for chosen in itertools.product(STATS, repeat=size):
            packed = b"".join(merge.packed_stat(facts) for facts in chosen)
            for at in (5, 9, 10):
                expected = all(merge.stat_trusted(facts.mtime_ns, at) for facts in chosen)
                assert merge.all_stats_trusted(packed, at) == expected


lstat_ints = st.integers(min_value=0, max_value=2**64 - 1)
lstat_times = st.integers(min_value=-(2**63), max_value=2**63 - 1)
lstat_facts = st.builds(StatFacts, lstat_ints, lstat_times, lstat_times, lstat_ints, lstat_ints)


@given(lstat_facts, lstat_facts)
def test_stat_proves_same_on_packed_stats_over_any_lstat_values(one: StatFacts, two: StatFacts) -> None:
    assert merge.unpacked_stat(merge.packed_stat(one)) == one
    assert (merge.packed_stat(one) == merge.packed_stat(two)) == (one == two)
    assert (merge.packed_stat(one) == merge.packed_stat(one._replace(mode=two.mode))) == (one.mode == two.mode)


# ---------------------------------------------------------------------------------------------------------------------
# The entry: cow_entry. The shell reads three trees and asks `plan` (eukhe.workspace.handback); trees a disk holds
# get the table's plan, whatever order the shell read them in; any other tree gets exactly one `TreeError`.


def fresh(entry: Entry) -> Entry:
    """An equal entry, a new record."""
    if isinstance(entry, File):
        return File(entry.identity)
    if isinstance(entry, Link):
        return Link(entry.target)
    return Dir()


def rebuilt(tree: Tree) -> dict[str, Entry]:
    """The same tree from fresh records, in the reverse order (the shell reads a disk in no fixed order)."""
    return {path: fresh(entry) for path, entry in reversed(list(tree.items()))}


def check_entry_answers(base: Tree, parent: Tree, child: Tree) -> None:
    for name, tree in (("base", base), ("parent", parent), ("child", child)):
        assert merge.tree_error(name, tree) is None, name
    handback = merge.plan(base, parent, child)
    assert merge.plan(rebuilt(base), rebuilt(parent), rebuilt(child)) == handback
    check_plan(base, parent, child)  # each step is the table on its path's states, in a safe order


def test_cow_entry_answers_exhaustively_over_tiny_trees() -> None:
    for triple in TINY_TRIPLES:
        check_entry_answers(*triple)


@given(tree_triples())
def test_cow_entry_answers_the_model(triple: tuple[Tree, Tree, Tree]) -> None:
    check_entry_answers(*triple)


def refusal_of(base: object, parent: object, child: object) -> tuple[str, str | None] | None:
    """The tree and path a `TreeError` from `plan` names, or None when the plan is made."""
    try:
        merge.plan(base, parent, child)  # type: ignore[arg-type]
    except TreeError as refused:
        return refused.tree, refused.path
    return None


GOOD: dict[str, Entry] = {"a": File("x")}

MALFORMED: list[tuple[tuple[object, object, object], tuple[str, str | None]]] = [
    ((None, GOOD, GOOD), ("base", None)),
    ((GOOD, [], GOOD), ("parent", None)),
    ((GOOD, GOOD, "dir"), ("child", None)),
    ((GOOD, GOOD, 3), ("child", None)),
    (({"": A}, GOOD, GOOD), ("base", "")),
    (({"/a": A}, GOOD, GOOD), ("base", "/a")),
    (({"a/": A}, GOOD, GOOD), ("base", "a/")),
    (({"a//b": A}, GOOD, GOOD), ("base", "a//b")),
    (({"./a": A}, GOOD, GOOD), ("base", "./a")),
    (({"a/..": A}, GOOD, GOOD), ("base", "a/..")),
    (({"..": A}, GOOD, GOOD), ("base", "..")),
    (({"a\0b": A}, GOOD, GOOD), ("base", "a\0b")),
    (({7: A}, GOOD, GOOD), ("base", 7)),
    (({"a": File(1)}, GOOD, GOOD), ("base", "a")),  # type: ignore[arg-type]
    (({"a": File(None)}, GOOD, GOOD), ("base", "a")),  # type: ignore[arg-type]
    (({"a": Link("")}, GOOD, GOOD), ("base", "a")),
    (({"a": Link(7)}, GOOD, GOOD), ("base", "a")),  # type: ignore[arg-type]
    (({"a": Link("t\0")}, GOOD, GOOD), ("base", "a")),
    (({"a": "file"}, GOOD, GOOD), ("base", "a")),
    (({"a": None}, GOOD, GOOD), ("base", "a")),
    (({"a": {"file": "x"}}, GOOD, GOOD), ("base", "a")),
    (({"a": Void.DIR}, GOOD, GOOD), ("base", "a")),  # a state is not an entry
    ((GOOD, {"a": A, "a/b": B}, GOOD), ("parent", "a/b")),
    ((GOOD, GOOD, {"a/b/c": Dir(), "a": LINK}), ("child", "a/b/c")),
    ((GOOD, {"ok": Dir(), "x": 0}, {"y": 0}), ("parent", "x")),  # the first wrong tree, base, parent, then child
    (({"b/c": A, "a/b": A, "a": B}, GOOD, GOOD), ("base", "a/b")),  # the first wrong path in the tree's order
]


@pytest.mark.parametrize(("trees", "refused"), MALFORMED)
def test_cow_entry_refuses_malformed_exactly(
    trees: tuple[object, object, object], refused: tuple[str, str | None]
) -> None:
    assert refusal_of(*trees) == refused


path_parts = st.text(alphabet="a./\0\n", max_size=6)


@given(st.lists(path_parts, max_size=6))
def test_cow_entry_checks_all_paths_at_once_as_one_by_one(paths: list[str]) -> None:
    assert merge.all_valid_paths(paths) == all(merge.valid_path(path) for path in paths)


def test_cow_entry_checks_all_paths_at_once_as_one_by_one_exhaustively() -> None:
    names = ["", "a", ".", "..", "a\0", "\n"]
    paths = ["/".join(parts) for size in (1, 2, 3) for parts in itertools.product(names, repeat=size)]
    for path in paths:
        assert merge.all_valid_paths([path]) == merge.valid_path(path), path
        assert merge.all_valid_paths(["a", path, "b"]) == merge.valid_path(path), path
    assert not merge.all_valid_paths(["a", 1])


junk = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4), st.lists)


@given(tree_triples(), st.sampled_from(["base", "parent", "child"]), junk)
def test_cow_entry_refuses_any_non_request(triple: tuple[Tree, Tree, Tree], name: str, value: object) -> None:
    """Whatever is not a mapping, in place of any one tree, is refused as that tree."""
    trees = dict(zip(("base", "parent", "child"), triple, strict=True))
    trees[name] = value  # type: ignore[assignment]
    assert refusal_of(trees["base"], trees["parent"], trees["child"]) == (name, None)


junk_entries = (
    st.none()
    | st.integers()
    | st.text(max_size=3)
    | st.builds(File, st.integers() | st.none())
    | st.builds(Link, st.just("") | st.integers() | st.text(max_size=2).map(lambda t: t + "\0"))
)
bad_paths = st.sampled_from(["", "/", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "a\0"]) | st.integers()


@given(tree_triples(), st.sampled_from(["base", "parent", "child"]), junk_entries, bad_paths, st.data())
def test_cow_entry_refuses_one_bad_field(
    triple: tuple[Tree, Tree, Tree], name: str, bad: object, bad_path: object, data: st.DataObject
) -> None:
    """One bad entry at any path, or one bad path, in any one tree: refused there and nowhere else."""
    trees = {key: dict(tree) for key, tree in zip(("base", "parent", "child"), triple, strict=True)}
    tree: dict[object, object] = trees[name]  # type: ignore[assignment]
    if data.draw(st.booleans(), label="bad path"):
        tree[bad_path] = A
        where = bad_path
    else:
        where = data.draw(st.sampled_from([*tree, "fresh"]), label="path")
        tree[where] = bad
    assert refusal_of(trees["base"], trees["parent"], trees["child"]) == (name, where)


def test_cow_entry_example() -> None:
    """An anchor on trees the shell reads and the plan it gets."""
    base = {"kept": File("k"), "edited": File("e0"), "gone": File("g"), "both": File("b0")}
    parent = {"kept": File("k"), "edited": File("e0"), "gone": File("g"), "both": File("b1")}
    child = {"kept": File("k"), "edited": File("e1"), "both": File("b2"), "new/link": Link("x")}
    assert merge.plan(base, parent, child) == HandbackPlan(
        (
            merge.Step("gone", Verdict.TAKE, None),
            merge.Step("edited", Verdict.TAKE, File("e1")),
            merge.Step("new/link", Verdict.TAKE, Link("x")),
            merge.Step("both", Verdict.CONFLICT, File("b2"), merge.Reason.BOTH_CHANGED),
        ),
        frozenset({"kept"}),
    )
    blocked = merge.plan({}, {"d": Dir()}, {"d": File("f")})
    assert blocked.steps == (merge.Step("d", Verdict.BLOCKED, File("f"), merge.Reason.PARENT_HOLDS_DIRECTORY),)


# ---------------------------------------------------------------------------------------------------------------------
# The laws can fail: each family, run on a core broken the way a plausible bug would break it, must fail.

real_plan_path = merge.plan_path


def taking_over_the_parents_change(base: State, parent: State, child: State) -> Verdict:
    """Bug: 'the child wins' on a conflict (the parent's change is lost)."""
    verdict = real_plan_path(base, parent, child)
    return Verdict.TAKE if verdict is Verdict.CONFLICT else verdict


def taking_unchanged_paths(base: State, parent: State, child: State) -> Verdict:
    """Bug: copies every child file back, changed or not (a parent's edit is overwritten)."""
    verdict = real_plan_path(base, parent, child)
    return Verdict.TAKE if verdict is Verdict.KEEP and leaf_of(child) is not None else verdict


def conflicting_on_every_change(base: State, parent: State, child: State) -> Verdict:
    """Bug: reports a conflict whenever the parent changed too, even to the child's content."""
    verdict = real_plan_path(base, parent, child)
    return Verdict.CONFLICT if verdict is Verdict.KEPT and leaf_of(child) is not None else verdict


def ignoring_removals(base: State, parent: State, child: State) -> Verdict:
    """Bug: a child's removal counts as no change."""
    return Verdict.KEEP if leaf_of(child) is None else real_plan_path(base, parent, child)


def writing_over_directories(base: State, parent: State, child: State) -> Verdict:
    """Bug: never blocks: writes the child's file where the parent holds a directory or a file above it."""
    verdict = real_plan_path(base, parent, child)
    return Verdict.TAKE if verdict is Verdict.BLOCKED and not changed(base, parent) else verdict


MUTANTS: list[tuple[Callable[[State, State, State], Verdict], list[str]]] = [
    (taking_over_the_parents_change, ["cow_conflict_reported", "cow_plan_is_merge"]),
    (taking_unchanged_paths, ["cow_keeps_parent", "cow_plan"]),
    (conflicting_on_every_change, ["cow_conflict_is_real", "cow_plan_is_merge"]),
    (ignoring_removals, ["cow_takes_child", "cow_conflict_reported", "cow_plan_is_merge"]),
    (writing_over_directories, ["cow_conflict_reported", "cow_plan"]),
]


def law_fails(name: str) -> bool:
    """Whether the law family `name` fails anywhere on its exhaustive domain."""
    try:
        if name in PER_PATH_LAWS:
            for triple in TRIPLES:
                PER_PATH_LAWS[name](*triple)
        else:
            for triple in TINY_TRIPLES:
                TREE_LAWS[name](*triple)
    except (AssertionError, ValueError):
        return True
    return False


@pytest.mark.parametrize(("mutant", "laws"), MUTANTS, ids=[m.__name__ for m, _ in MUTANTS])
def test_the_cow_laws_catch_a_broken_table(
    monkeypatch: pytest.MonkeyPatch, mutant: Callable[[State, State, State], Verdict], laws: list[str]
) -> None:
    assert not any(law_fails(name) for name in laws)  # the real core passes
    monkeypatch.setattr(merge, "plan_path", mutant)
    for name in laws:
        assert law_fails(name), f"{name} passed on {mutant.__name__}"


def test_cow_plan_catches_an_unsafe_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: removals run last (a write comes before the removal of the file that stands in its way)."""
    real_phase_of = merge.phase_of
    monkeypatch.setattr(merge, "phase_of", lambda step: Phase.NOTHING if step.removes else real_phase_of(step))
    assert law_fails("cow_plan")


def test_the_tree_laws_catch_a_plan_that_forgets_the_freed_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: a path under a parent's file that the plan removes stays blocked; a rerun would then take it."""
    real_plan = merge.plan

    def plan_without_freeing(base: Tree, parent: Tree, child: Tree) -> HandbackPlan:
        steps = [
            replace(s, verdict=Verdict.BLOCKED) if s.writes and state_of(parent, s.path) is Void.UNDER else s
            for s in real_plan(base, parent, child).steps
        ]
        ordered = sorted(steps, key=lambda s: (phase_of(s), merge.path_order(s.path)))
        return HandbackPlan(tuple(ordered), real_plan(base, parent, child).kept)

    monkeypatch.setattr(merge, "plan", plan_without_freeing)
    assert law_fails("idempotent")
    assert law_fails("cow_plan")


def test_cow_entry_catches_a_path_check_that_lets_dot_dot_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: the tree check takes any non-empty string as a path."""
    monkeypatch.setattr(merge, "valid_path", lambda path: isinstance(path, str) and bool(path))
    with pytest.raises(AssertionError):
        test_cow_entry_refuses_malformed_exactly(({"a/..": A}, GOOD, GOOD), ("base", "a/.."))


def test_cow_entry_catches_an_entry_check_that_takes_any_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: the tree check takes a File whatever its identity."""
    monkeypatch.setattr(merge, "_valid_entry", lambda entry: isinstance(entry, File | Link | Dir))
    with pytest.raises(AssertionError):
        test_cow_entry_refuses_malformed_exactly(({"a": File(1)}, GOOD, GOOD), ("base", "a"))  # type: ignore[arg-type]


def test_cow_entry_catches_a_tree_check_blind_to_a_file_above(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: the tree check never looks above a path."""
    monkeypatch.setattr(merge, "_first_under_a_leaf", lambda tree: None)
    with pytest.raises(AssertionError):
        test_cow_entry_refuses_malformed_exactly((GOOD, {"a": A, "a/b": B}, GOOD), ("parent", "a/b"))
