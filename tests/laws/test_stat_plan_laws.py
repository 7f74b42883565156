"""Laws of eukhe.core.stat_plan (spec S3 "A subagent's workspace" 4): which recorded files the hand-back's stat
check decides, and the share its helper process takes. Each law over free records with Hypothesis, and
exhaustively where the domain is small: one path's every kind, and every split of up to four small groups."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.merge import packed_stat
from eukhe.core.stat_plan import StatCheckPlan, StatGroup, plan_stat_checks, split_groups
from eukhe.records.workspace import CopiedPath

RECORDED_AT = 1_000
DIRECTORIES = ("", "a", "a/b", "c")
SHARES = (0.0, 0.25, 0.45, 0.5, 1.0)


def copied(path: str, *, link: bool = False, mtime: int = 0) -> CopiedPath:
    """A recorded path whose copy's stat data hold `mtime` (racy when not older than RECORDED_AT)."""
    facts = packed_stat((len(path), mtime, mtime, hash(path) & 0xFFFF, 0o100644))
    return CopiedPath(path=path, link="t" if link else None, source=facts, copy=facts)


@st.composite
def records(draw: st.DrawFn) -> list[CopiedPath]:
    """A sorted record of up to 12 paths over four directories: files, symlinks, racy files."""
    paths = draw(
        st.sets(st.tuples(st.sampled_from(DIRECTORIES), st.sampled_from(("x", "y", "z"))), max_size=12).map(
            lambda pairs: sorted(f"{d}/{n}" if d else n for d, n in pairs)
        )
    )
    return [
        copied(path, link=draw(st.booleans()), mtime=draw(st.sampled_from((0, RECORDED_AT - 1, RECORDED_AT, 2_000))))
        for path in paths
    ]


live_sets = st.sets(st.sampled_from(DIRECTORIES))


def paths_of(groups: list[StatGroup]) -> Iterator[str]:
    for directory, files in groups:
        for name, _ in files:
            yield f"{directory}/{name}" if directory else name


def checkable(entry: CopiedPath, live: set[str]) -> bool:
    """What a stat check can decide, said the plain way: a regular file, in a live directory, not racy."""
    mtime = int.from_bytes(entry.copy[8:16], "little", signed=True)
    return entry.link is None and entry.path.rpartition("/")[0] in live and mtime < RECORDED_AT


def check_plan(record: list[CopiedPath], live: set[str], share: float) -> StatCheckPlan:
    plan = plan_stat_checks(record, live, RECORDED_AT, share)
    checked = [*paths_of(plan.mine), *paths_of(plan.theirs)]
    # partitions: every recorded path is in exactly one of mine, theirs and rest
    assert sorted([*checked, *plan.rest]) == sorted(entry.path for entry in record)
    assert len(set(checked) | set(plan.rest)) == len(record)
    # rest is exactly what no stat check decides; the checked files keep the record's order and its stat data
    assert plan.rest == [entry.path for entry in record if not checkable(entry, live)]
    assert checked == [entry.path for entry in record if checkable(entry, live)]
    by_path = {entry.path: entry.copy for entry in record}
    for directory, files in [*plan.mine, *plan.theirs]:
        assert files, "no empty group"
        for name, packed in files:
            assert by_path[f"{directory}/{name}" if directory else name] == packed
    return plan


@given(records(), live_sets, st.sampled_from(SHARES))
def test_stat_plan_partitions_the_record(record: list[CopiedPath], live: set[str], share: float) -> None:
    check_plan(record, live, share)


def test_stat_plan_partitions_the_record_exhaustively_for_one_path() -> None:
    """Every kind one path can be: each directory, live or not, a file or a symlink, each mtime."""
    for directory, alive, link, mtime in itertools.product(
        DIRECTORIES, (False, True), (False, True), (0, RECORDED_AT - 1, RECORDED_AT, 2_000)
    ):
        path = f"{directory}/x" if directory else "x"
        plan = check_plan([copied(path, link=link, mtime=mtime)], {directory} if alive else set(), 0.0)
        assert (plan.rest == []) == (alive and not link and mtime < RECORDED_AT)


def check_split(groups: list[StatGroup], share: float) -> None:
    mine, theirs = split_groups(groups, share)
    assert [*mine, *theirs] == groups  # whole groups, in order
    total = sum(len(files) for _, files in groups)
    their_files = sum(len(files) for _, files in theirs)
    assert their_files <= total * share  # at most the share
    if mine:  # the longest such tail: one more group would pass the share
        assert their_files + len(mine[-1][1]) > total * share


def test_stat_plan_helper_share_is_the_longest_tail_within_it_exhaustively() -> None:
    """Every sequence of up to four groups of one to three files, at each share."""
    for count in range(5):
        for sizes in itertools.product((1, 2, 3), repeat=count):
            groups = [(str(i), [(f"f{j}", b"") for j in range(size)]) for i, size in enumerate(sizes)]
            for share in SHARES:
                check_split(groups, share)


@given(st.lists(st.integers(1, 50), max_size=30), st.floats(0.0, 1.0))
def test_stat_plan_helper_share_is_the_longest_tail_within_it(sizes: list[int], share: float) -> None:
    groups = [(str(i), [(f"f{j}", b"") for j in range(size)]) for i, size in enumerate(sizes)]
    check_split(groups, share)


@given(records(), live_sets)
def test_stat_plan_without_a_helper_keeps_every_check_here(record: list[CopiedPath], live: set[str]) -> None:
    assert check_plan(record, live, 0.0).theirs == []
