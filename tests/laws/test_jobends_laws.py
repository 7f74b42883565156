"""Job records that outlive their process (S2 jobs 5): the reason a reopen gives, the end it records, and
the fold of the journal's job facts into the jobs of earlier lives.

`end_reason` is checked exhaustively (its domain is finite once boot ids are drawn from a small set, which is every
case: equal, different, unknown). `past_jobs` is checked against a reference written per job (filter the facts of
one job, then read them), over free fact streams and exhaustively over short ones, and with the reopen's own facts
appended: after a reopen no job of the history is left running.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.jobends import (
    END_REASONS,
    STOP_REASONS,
    EndRecorded,
    GroupMark,
    HistoryFact,
    LeftNode,
    NodePut,
    NodeRetired,
    PastJob,
    StopReason,
    end_reason,
    group_is_the_jobs,
    past_jobs,
    reopened_ends,
)

BOOTS: list[str | None] = [None, "boot-a", "boot-b"]
STOPS: list[StopReason | None] = [None, *STOP_REASONS]
JOBS = ["a", "b", "c"]


def test_end_reason_exhaustively() -> None:
    seen = set()
    for stop, started, now in itertools.product(STOPS, BOOTS, BOOTS):
        reason = end_reason(stop, started, now)
        seen.add(reason)
        if stop is not None:
            assert reason == stop  # a recorded stop is the first cause
        elif started is not None and now is not None and started != now:
            assert reason == "host_restart"
        else:
            assert reason == "worker_died"
    assert seen == set(END_REASONS)


def test_a_reopen_in_the_same_boot_never_says_host_restart() -> None:
    for stop, boot in itertools.product(STOPS, BOOTS):
        assert end_reason(stop, boot, boot) != "host_restart"


def test_without_a_recorded_stop_only_a_known_change_of_boot_says_host_restart() -> None:
    for started, now in itertools.product(BOOTS, BOOTS):
        restarted = end_reason(None, started, now) == "host_restart"
        assert restarted == (None not in (started, now) and started != now)


left_nodes = st.lists(
    st.builds(LeftNode, st.text(min_size=1, max_size=4), st.sampled_from(STOPS), st.sampled_from(BOOTS)),
    max_size=8,
    unique_by=lambda node: node.job,
)


@given(left_nodes, st.sampled_from(BOOTS))
def test_a_reopen_ends_every_left_node_once_killed_without_exit_code_in_order(
    nodes: list[LeftNode], boot: str | None
) -> None:
    ends = reopened_ends(nodes, boot)
    assert [end.job for end in ends] == [node.job for node in nodes]
    for node, end in zip(nodes, ends, strict=True):
        assert end.killed is True
        assert end.exit_code is None
        assert end.reason == end_reason(node.stop, node.boot, boot)


# ---- the fold of the journal's facts -------------------------------------------------------------------------------


def reference(facts: list[HistoryFact[Any]]) -> list[PastJob[Any]]:
    """The jobs of a history, read one job at a time from its own facts."""
    order: list[str] = []
    for fact in facts:
        if not isinstance(fact, NodeRetired) and fact.job not in order:
            order.append(fact.job)
    jobs = []
    for job in order:
        own = [fact for fact in facts if fact.job == job]
        first = next(i for i, fact in enumerate(own) if not isinstance(fact, NodeRetired))
        own = own[first:]  # a retire before the job appears names no job
        puts = [fact for fact in own if isinstance(fact, NodePut)]
        ends = [fact for fact in own if isinstance(fact, EndRecorded)]
        named = puts[0] if puts else ends[0]
        started = puts[0].started_ms if puts else ends[0].started_ms
        ended = bool(ends) or any(isinstance(fact, NodeRetired) for fact in own)
        jobs.append(
            PastJob(
                job,
                named.kind,
                named.command,
                0 if started is None else started,
                ended,
                ends[0].end if ends else None,
            )
        )
    return jobs


facts_strategy = st.lists(
    st.one_of(
        st.builds(NodePut, st.sampled_from(JOBS), st.sampled_from(["bash", "cell"]), st.just("cmd"), st.integers(0, 9)),
        st.builds(NodeRetired, st.sampled_from(JOBS)),
        st.builds(
            EndRecorded,
            st.sampled_from(JOBS),
            st.sampled_from(["bash", "cell"]),
            st.just("row"),
            st.one_of(st.none(), st.integers(0, 9)),
            st.integers(0, 99),
        ),
    ),
    max_size=12,
)


@given(facts_strategy)
def test_past_jobs_equals_the_per_job_reference(facts: list[HistoryFact[Any]]) -> None:
    assert list(past_jobs(facts)) == reference(facts)


@given(facts_strategy)
def test_each_job_is_listed_once_and_its_end_is_its_first_row(facts: list[HistoryFact[Any]]) -> None:
    past = past_jobs(facts)
    assert len({job.job for job in past}) == len(past)
    for job in past:
        rows = [fact.end for fact in facts if isinstance(fact, EndRecorded) and fact.job == job.job]
        assert job.end == (rows[0] if rows else None)
        if rows:
            assert job.ended


def test_past_jobs_exhaustively_over_short_histories() -> None:
    alphabet: list[HistoryFact[Any]] = [
        NodePut("a", "bash", "x", 1),
        NodePut("a", "bash", "x", 2),  # a stop recorded on the node: same job, a later put
        NodeRetired("a"),
        EndRecorded("a", "bash", "x", None, "end-1"),
        EndRecorded("a", "bash", "x", 3, "end-2"),
        NodePut("b", "cell", "y", 4),
        NodeRetired("b"),
    ]
    count = 0
    for length in range(5):
        for facts in itertools.product(alphabet, repeat=length):
            assert list(past_jobs(facts)) == reference(list(facts))
            count += 1
    assert count == sum(len(alphabet) ** n for n in range(5))


def lifecycle(facts: list[HistoryFact[Any]]) -> bool:
    """A history a journal can hold: each job's node is put before it is retired, retired at most once, and a job
    has at most one end row, recorded with or after its node's retire (never while the node stays)."""
    state: dict[str, str] = {}
    rows: set[str] = set()
    for fact in facts:
        now = state.get(fact.job)
        if isinstance(fact, NodePut):
            if now not in (None, "put"):
                return False
            state[fact.job] = "put"
        elif isinstance(fact, NodeRetired):
            if now != "put":
                return False
            state[fact.job] = "retired"
        else:
            if fact.job in rows or now == "put":
                return False
            rows.add(fact.job)
    return True


@given(facts_strategy.filter(lifecycle), st.sampled_from(BOOTS))
def test_after_the_reopen_records_its_ends_no_job_of_the_history_runs(
    facts: list[HistoryFact[Any]], boot: str | None
) -> None:
    left = [LeftNode(job.job, None, None) for job in past_jobs(facts) if not job.ended]
    reopened: list[HistoryFact[Any]] = []
    for end in reopened_ends(left, boot):
        reopened += [NodeRetired(end.job), EndRecorded(end.job, "bash", "cmd", None, end)]
    after = past_jobs([*facts, *reopened])
    assert all(job.ended for job in after)
    assert [job.job for job in after] == [job.job for job in past_jobs(facts)]  # no job appears or goes
    for job in after:
        if job.job in {node.job for node in left}:
            assert job.end is not None
            assert job.end.reason == "worker_died"


def test_group_is_the_jobs_exhaustively() -> None:
    """A reopen ends a left process group only in the job's own boot, and only when its leader is the job's (same
    start) or, the leader gone, a member carries the job's mark: over every boot pair, leader fact and mark count."""
    mark = GroupMark(group=4242, leader_start=500, mark="m")
    for started, now, leader, marked in itertools.product(BOOTS, BOOTS, [None, 499, 500, 501], [0, 1, 2]):
        same_boot = started is not None and started == now
        expected = same_boot and (leader == 500 if leader is not None else marked > 0)
        assert group_is_the_jobs(mark, started, now, leader, marked) is expected, (started, now, leader, marked)
