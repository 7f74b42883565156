"""Laws of eukhe.core.stat_plan (spec S3 "A subagent's workspace" 4): which recorded files the hand-back's stat
check decides, the share offered to its helper process, and which of the helper's answers count. Each law over free
records with Hypothesis, and exhaustively where the domain is small: one path's every kind, every split of up to
four small groups, and every meeting of the two sides over up to six groups."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.merge import packed_stat
from eukhe.core.stat_plan import GROUP_FILES, StatCheckPlan, StatGroup, helpers_part, plan_stat_checks, split_groups
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


def check_plan(record: list[CopiedPath], live: set[str], share: float, group_files: int = GROUP_FILES) -> StatCheckPlan:
    plan = plan_stat_checks(record, live, RECORDED_AT, share, group_files)
    checked = [*paths_of(plan.mine), *paths_of(plan.theirs)]
    # partitions: every recorded path is in exactly one of mine, theirs and rest
    assert sorted([*checked, *plan.rest]) == sorted(entry.path for entry in record)
    assert len(set(checked) | set(plan.rest)) == len(record)
    # rest is exactly what no stat check decides; the checked files keep the record's order and its stat data
    assert plan.rest == [entry.path for entry in record if not checkable(entry, live)]
    assert checked == [entry.path for entry in record if checkable(entry, live)]
    by_path = {entry.path: entry.copy for entry in record}
    groups = [*plan.mine, *plan.theirs]
    for index, (directory, files) in enumerate(groups):
        assert 0 < len(files) <= group_files, "no empty group, none over group_files"
        if index and groups[index - 1][0] == directory:  # one directory's files go on in a new group only when full
            assert len(groups[index - 1][1]) == group_files
        for name, packed in files:
            assert by_path[f"{directory}/{name}" if directory else name] == packed
    return plan


@given(records(), live_sets, st.sampled_from(SHARES), st.integers(1, 4))
def test_stat_plan_partitions_the_record(
    record: list[CopiedPath], live: set[str], share: float, group_files: int
) -> None:
    check_plan(record, live, share, group_files)


def test_stat_plan_partitions_the_record_exhaustively_for_one_path() -> None:
    """Every kind one path can be: each directory, live or not, a file or a symlink, each mtime."""
    for directory, alive, link, mtime in itertools.product(
        DIRECTORIES, (False, True), (False, True), (0, RECORDED_AT - 1, RECORDED_AT, 2_000)
    ):
        path = f"{directory}/x" if directory else "x"
        plan = check_plan([copied(path, link=link, mtime=mtime)], {directory} if alive else set(), 0.0)
        assert (plan.rest == []) == (alive and not link and mtime < RECORDED_AT)


def test_stat_plan_groups_hold_at_most_group_files_exhaustively() -> None:
    """One live directory of up to six checkable files, at each group size: full groups, then the rest."""
    for directory, count, group_files in itertools.product(DIRECTORIES, range(7), range(1, 5)):
        record = sorted(
            (copied(f"{directory}/f{i}" if directory else f"f{i}") for i in range(count)), key=lambda c: c.path
        )
        plan = check_plan(record, {directory}, 0.0, group_files)
        full, left = divmod(count, group_files)
        assert [len(files) for _, files in plan.mine] == [group_files] * full + ([left] if left else [])


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


def check_meeting(groups: int, first_answered: int, checked_here: int, also_answered: int) -> None:
    """The helper answered the groups from `first_answered` on (and, racing this side, `also_answered` more below
    them); this side checked the first `checked_here` (at least up to where the helper's answers begin)."""
    answered = {index: [f"g{index}"] for index in range(max(0, first_answered - also_answered), groups)}
    here = [f"g{index}" for index in range(checked_here)]
    assert sorted([*here, *helpers_part(checked_here, answered)]) == sorted(f"g{index}" for index in range(groups))


def test_stat_plan_helpers_part_takes_each_group_once_exhaustively() -> None:
    """Every meeting of the two sides over up to six groups: each group's answer is in the result exactly once."""
    for groups in range(7):
        for first_answered in range(groups + 1):
            for checked_here in range(first_answered, groups + 1):
                for also_answered in range(3):
                    check_meeting(groups, first_answered, checked_here, also_answered)


@given(st.integers(0, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), st.data())
def test_stat_plan_helpers_part_takes_each_group_once(groups_first: tuple[int, int], data: st.DataObject) -> None:
    groups, first_answered = groups_first
    check_meeting(groups, first_answered, data.draw(st.integers(first_answered, groups)), data.draw(st.integers(0, 5)))
