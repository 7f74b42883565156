"""Laws of eukhe.core.retention (artifact retention, docs/daemon.md): what an artifact collection removes, over
generated artifact sets."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.retention import Artifact, Policy, Reason, Removal, plan

NOW = 10_000_000

artifacts = st.lists(
    st.builds(
        Artifact,
        path=st.text("abc/", min_size=1, max_size=4),
        size=st.integers(0, 1000),
        mtime_ms=st.integers(NOW - 5000, NOW + 10),
        kept=st.booleans(),
    ),
    max_size=20,
    unique_by=lambda artifact: artifact.path,
)
policies = st.builds(Policy, max_total_bytes=st.integers(0, 6000), max_age_ms=st.integers(0, 4000))


def removed(removals: tuple[Removal, ...]) -> set[str]:
    return {removal.artifact.path for removal in removals}


def old(artifact: Artifact, policy: Policy) -> bool:
    return policy.max_age_ms > 0 and NOW - artifact.mtime_ms > policy.max_age_ms


@given(artifacts, policies)
def test_retention_never_removes_a_kept_artifact(files: list[Artifact], policy: Policy) -> None:
    gone = removed(plan(files, policy, NOW))
    assert not any(artifact.kept and artifact.path in gone for artifact in files)


@given(artifacts, policies)
def test_retention_removes_each_artifact_at_most_once_and_only_listed_ones(
    files: list[Artifact], policy: Policy
) -> None:
    removals = plan(files, policy, NOW)
    paths = [removal.artifact.path for removal in removals]
    assert len(paths) == len(set(paths))
    assert {removal.artifact for removal in removals} <= set(files)


@given(artifacts, policies)
def test_retention_removes_for_age_exactly_the_old_ones_not_kept(files: list[Artifact], policy: Policy) -> None:
    by_age = {r.artifact.path for r in plan(files, policy, NOW) if r.reason is Reason.AGE}
    assert by_age == {a.path for a in files if not a.kept and old(a, policy)}


@given(artifacts, policies)
def test_retention_leaves_the_total_within_the_limit_unless_only_kept_ones_are_left(
    files: list[Artifact], policy: Policy
) -> None:
    gone = removed(plan(files, policy, NOW))
    left = [a for a in files if a.path not in gone]
    if policy.max_total_bytes > 0 and sum(a.size for a in left) > policy.max_total_bytes:
        assert all(a.kept for a in left)


@given(artifacts, policies)
def test_retention_removes_the_oldest_first_and_no_more_than_it_must(files: list[Artifact], policy: Policy) -> None:
    removals = plan(files, policy, NOW)
    gone = removed(removals)
    by_size = [r.artifact for r in removals if r.reason is Reason.SIZE]
    survivors = [a for a in files if a.path not in gone and not a.kept]
    for artifact in by_size:  # every one removed for size is older than every survivor that could have gone
        assert all((artifact.mtime_ms, artifact.path) < (s.mtime_ms, s.path) for s in survivors)
    if by_size:  # the last one removed for size was needed: with it back, the total is over the limit
        last = by_size[-1]
        assert sum(a.size for a in files if a.path not in gone) + last.size > policy.max_total_bytes
    assert policy.max_total_bytes > 0 or not by_size


def all_laws(files: list[Artifact], policy: Policy) -> None:
    for law in (
        test_retention_never_removes_a_kept_artifact,
        test_retention_removes_each_artifact_at_most_once_and_only_listed_ones,
        test_retention_removes_for_age_exactly_the_old_ones_not_kept,
        test_retention_leaves_the_total_within_the_limit_unless_only_kept_ones_are_left,
        test_retention_removes_the_oldest_first_and_no_more_than_it_must,
    ):
        law.hypothesis.inner_test(files, policy)  # type: ignore[attr-defined]


def test_retention_laws_hold_over_every_small_artifact_set() -> None:
    """Exhaustively: up to 3 artifacts, each of size 1 or 2, 0 to 3 ms old, kept or not; every limit up to 5 bytes
    and 2 ms (0: none). The boundaries (a total exactly at the limit, an age exactly the limit) are all in here."""
    kinds = [(size, age, kept) for size, age, kept in itertools.product((1, 2), (0, 1, 2, 3), (False, True))]
    for count in range(4):
        for combo in itertools.product(kinds, repeat=count):
            files = [Artifact(f"f{i}", size, NOW - age, kept) for i, (size, age, kept) in enumerate(combo)]
            for total, age_limit in itertools.product(range(6), range(3)):
                all_laws(files, Policy(max_total_bytes=total, max_age_ms=age_limit))


def test_retention_example() -> None:
    files = [
        Artifact("old", 10, NOW - 9000),
        Artifact("pinned", 500, NOW - 8000, kept=True),
        Artifact("a", 300, NOW - 100),
        Artifact("b", 300, NOW - 50),
        Artifact("c", 300, NOW - 10),
    ]
    removals = plan(files, Policy(max_total_bytes=1000, max_age_ms=5000), NOW)
    expected = [("old", Reason.AGE), ("a", Reason.SIZE), ("b", Reason.SIZE)]  # 1400 > 1000, 1100 > 1000, 800
    assert [(r.artifact.path, r.reason) for r in removals] == expected
    assert plan(files, Policy(max_total_bytes=0, max_age_ms=0), NOW) == ()
