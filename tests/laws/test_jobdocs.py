"""The job writer's batch decisions (S2 jobs 5), over free record streams and exhaustively over short ones.

The reference: the nodes after committing a stream batch by batch equal the nodes after committing it one record at
a time (no batching can lose or invent a node), a job that starts and ends in one batch writes nothing, and an end
whose node is absent retires nothing.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.jobdocs import (
    AppendEntry,
    JobEnded,
    JobStarted,
    PutNode,
    RetireNode,
    WriterEntry,
    WriterRecord,
    nodes_after,
    plan_batch,
)

JOBS = ["a", "b", "c"]


def lifecycle_streams(records: list[WriterRecord]) -> bool:
    """A real stream: each job starts at most once and ends at most once, after its start."""
    started: set[str] = set()
    ended: set[str] = set()
    for record in records:
        if isinstance(record, JobStarted):
            if record.job in started:
                return False
            started.add(record.job)
        elif isinstance(record, JobEnded):
            if record.job not in started or record.job in ended:
                return False
            ended.add(record.job)
    return True


def commit_in_batches(records: list[WriterRecord], cuts: list[int]) -> tuple[frozenset[str], list[object]]:
    nodes: frozenset[str] = frozenset()
    writes: list[object] = []
    bounds = [0, *sorted(set(cuts)), len(records)]
    for low, high in itertools.pairwise(bounds):
        batch = plan_batch(nodes, records[low:high])
        writes.extend(batch)
        nodes = nodes_after(nodes, batch)
    return nodes, writes


record_strategy = st.one_of(
    st.builds(JobStarted, st.sampled_from(JOBS), st.just({})),
    st.builds(JobEnded, st.sampled_from(JOBS)),
    st.builds(WriterEntry, st.just("notice"), st.integers(0, 3)),
)


def check_stream(records: list[WriterRecord], cuts: list[int]) -> None:
    batched, writes = commit_in_batches(records, cuts)
    alone, _ = commit_in_batches(records, list(range(len(records))))
    assert batched == alone  # batching never changes the nodes
    started = {r.job for r in records if isinstance(r, JobStarted)}
    ended = {r.job for r in records if isinstance(r, JobEnded)}
    assert batched == frozenset(started - ended)
    # entries are written in order, every one
    assert [w.content for w in writes if isinstance(w, AppendEntry)] == [
        r.content for r in records if isinstance(r, WriterEntry)
    ]


@given(st.lists(record_strategy, max_size=12).filter(lifecycle_streams), st.lists(st.integers(0, 12), max_size=4))
def test_batches_commit_the_same_nodes_as_single_records(records: list[WriterRecord], cuts: list[int]) -> None:
    check_stream(records, [c for c in cuts if c <= len(records)])


def test_batches_commit_the_same_nodes_exhaustively_over_short_streams() -> None:
    alphabet: list[WriterRecord] = [JobStarted("a", {}), JobEnded("a"), JobStarted("b", {}), JobEnded("b")]
    count = 0
    for length in range(5):
        for records in itertools.product(alphabet, repeat=length):
            if not lifecycle_streams(list(records)):
                continue
            for mask in range(1 << max(0, length - 1)):
                cuts = [i + 1 for i in range(length - 1) if mask >> i & 1]
                check_stream(list(records), cuts)
                count += 1
    assert count > 50


def test_a_job_that_starts_and_ends_in_one_batch_writes_nothing() -> None:
    """Whatever nodes came before (also one of its own: the start and end of one batch are a pair; found by
    mutation testing, which could drop the pairing unseen)."""
    for present in (frozenset(), frozenset({"a"}), frozenset({"b"})):
        assert plan_batch(present, [JobStarted("a", {}), JobEnded("a")]) == ()


def test_an_end_whose_node_is_absent_retires_nothing() -> None:
    assert plan_batch(frozenset(), [JobEnded("a")]) == ()
    assert plan_batch(frozenset({"a"}), [JobEnded("a")]) == (RetireNode("a"),)
    assert plan_batch(frozenset(), [JobStarted("a", {"x": 1})]) == (PutNode("a", {"x": 1}),)
