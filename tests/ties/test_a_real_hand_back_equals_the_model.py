"""Tie (S3 "A subagent's workspace" 4-6): a real hand-back on disk equals the core's plan, path by path.

Hypothesis draws a base, a parent and a child tree (files, symlinks, directories, removals, nested paths, a file
turned into a directory and back, a mode change alone). The base is made real and copied into a child workspace for
real; the child's copy and the parent's directory are then reshaped, touching only what differs, into the child and
parent trees. The real hand-back must leave the parent's directory exactly as `back(plan(...))` says (every file,
symlink and directory), conflicts/ exactly as `conflicts_tree`, and report what the plan reports. The facts the
shell reads, the trees at the paths the child changed, must also plan the same verdicts as the model trees.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eukhe.core import merge
from eukhe.core.merge import Dir, Entry, File, Link, Tree
from eukhe.workspace import WorkspaceLayout, create_workspace, hand_back
from eukhe.workspace.facts import read_facts
from eukhe.workspace.spawn import load_copy_record
from tests.laws.test_merge_laws import tree_triples
from tests.workspace_support import age, expected_disk, handback_leftovers, read_disk, reshape

pytestmark = pytest.mark.real


def leaves_only(tree: Tree) -> dict[str, Entry]:
    """The base and the child are listings of files and symlinks: a copy holds no empty directory."""
    return {path: entry for path, entry in tree.items() if isinstance(entry, File | Link)}


def hand_back_for_real(base: Tree, parent: Tree, child: Tree) -> None:
    root = Path(tempfile.mkdtemp(prefix="ek-tie-"))
    try:
        parent_dir = root / "parent"
        parent_dir.mkdir()
        reshape(parent_dir, base)
        age(parent_dir)  # old stat data: unchanged files and directories are trusted, not read or listed again
        layout = WorkspaceLayout.at(root / "workspaces", "session", "child")
        create_workspace(parent_dir, layout)
        reshape(layout.copy, child)
        reshape(parent_dir, parent)

        handback = merge.plan(base, parent, child)
        facts = read_facts(layout, load_copy_record(layout))
        real_plan = merge.plan(facts.base, facts.parent, facts.child)
        verdicts = [(s.path, s.verdict, s.reason) for s in handback.steps]
        assert [(s.path, s.verdict, s.reason) for s in real_plan.steps] == verdicts
        assert sorted({*facts.base, *facts.child}) == sorted(merge.split_changed(base, child)[1])  # nothing more

        report = hand_back(layout)

        assert read_disk(parent_dir) == expected_disk(merge.back(handback, parent))
        assert read_disk(layout.conflicts)[0] == expected_disk(merge.conflicts_tree(handback))[0]
        assert report.paths_taken == handback.taken()
        assert report.paths_removed == handback.removed()
        assert [(c.path, c.reason) for c in report.conflicts] == [
            (s.path, s.reason.value if s.reason else None) for s in handback.conflicts()
        ]
        for conflict, step in zip(report.conflicts, handback.conflicts(), strict=True):
            expected_place = None if step.child is None else str(layout.conflicts / step.path)
            assert conflict.child_version == expected_place
        assert layout.copy.is_symlink() and layout.copy.resolve() == parent_dir.resolve()
        assert not layout.base.exists()
        assert not handback_leftovers(parent_dir, layout.dir)
    finally:
        shutil.rmtree(root)


@settings(max_examples=150)
@given(tree_triples())
def test_a_real_hand_back_equals_the_model(triple: tuple[Tree, Tree, Tree]) -> None:
    base, parent, child = triple
    hand_back_for_real(leaves_only(base), parent, leaves_only(child))


@given(st.sampled_from(sorted(range(13**3))))
def test_a_real_hand_back_equals_the_model_on_tiny_trees(index: int) -> None:
    """Tiny trees on `a` and `a/b` (files, symlinks, directories, a file under a file), drawn from all 2197."""
    from tests.laws.test_merge_laws import TINY

    base, parent, child = TINY[index // 169], TINY[index // 13 % 13], TINY[index % 13]
    hand_back_for_real(leaves_only(base), parent, leaves_only(child))


def test_the_tie_reaches_every_verdict() -> None:
    """Anchors that the generated trees are meant to reach, run once each on disk."""
    a, b, c = File("A"), File("B"), File("C")
    cases: list[tuple[Tree, Tree, Tree]] = [
        ({"a": a, "k": a}, {"a": a, "k": b}, {"a": b, "k": a}),  # take, keep (parent's edit stays)
        ({"a": a}, {"a": a}, {"a/b": b}),  # a file becomes a directory: remove, then write under it
        ({"a": a}, {"a": b}, {"a": c}),  # conflict; the child's version is a mode change
        ({"a": b}, {"a": a}, {"a": c}),  # conflict: the same bytes, another mode
        ({"a": a}, {"a": b}, {}),  # conflict: the child removed what the parent changed
        ({}, {"d": Dir()}, {"d": a}),  # blocked: a directory there
        ({}, {"d": Link("x")}, {"d/f": a}),  # blocked: a symlink where a directory goes
        ({"a": a}, {"a": b}, {"a": b}),  # kept
    ]
    seen = set()
    for base, parent, child in cases:
        hand_back_for_real(base, parent, child)
        handback = merge.plan(base, parent, child)
        seen |= {s.verdict for s in handback.steps} | ({merge.Verdict.KEEP} if handback.kept else set())
    assert seen == set(merge.Verdict)
