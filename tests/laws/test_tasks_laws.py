"""Laws of `eukhe.core.tasks` (MCP tasks, docs/mcp.md "Tasks"): a task's statuses, following a call, the cancel, the
TTL and the room.

The transition laws are checked over every short sequence of events whole (the domain is small: five kinds of
events, two revisions) and with Hypothesis over longer ones, against a reference written from the module's rules,
not from its code.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.tasks import (
    ENDED,
    MAX_TTL_MS,
    MIN_TTL_MS,
    TASK_TOOLS,
    TRANSITIONS,
    TTL_MS,
    Acknowledge,
    Admit,
    Again,
    Answered,
    Broke,
    CancelAsked,
    CancelCall,
    CancelJob,
    Cancelled,
    Done,
    Event,
    Full,
    Join,
    Proceed,
    Progressed,
    Refuse,
    Revision,
    Status,
    Task,
    Wait,
    admit,
    cancel_plan,
    cancel_verdict,
    end_status,
    expired,
    next_step,
    reported_ttl,
    step,
    ttl_for,
)

EVENTS: list[Event] = [
    Progressed("job j running"),
    Progressed("job j running, more"),
    Answered(is_error=False, message="[exit 0]"),
    Answered(is_error=True, message="unknown_job: no job"),
    Broke("the task's call failed"),
    CancelAsked(),
    Cancelled("cancelled: [killed]"),
]


def fresh(revision: Revision) -> Task:
    return Task("t", revision, created_ms=0, updated_ms=0, ttl_ms=TTL_MS)


def reference(revision: Revision, events: list[Event]) -> tuple[Status, str | None]:
    """The status and message after `events`, from the rules: the first ending event ends the task for good; once a
    cancel is asked only `Cancelled` ends it and the message no longer follows the progress."""
    status, message, asked = Status.WORKING, None, False
    for event in events:
        if status is not Status.WORKING:
            break
        if isinstance(event, Cancelled):
            status, message = Status.CANCELLED, event.message
        elif isinstance(event, CancelAsked):
            asked = True
        elif asked:
            continue
        elif isinstance(event, Progressed):
            message = event.message
        elif isinstance(event, Answered):
            failed = event.is_error and revision is Revision.UTILITY
            status, message = (Status.FAILED if failed else Status.COMPLETED), event.message
        elif isinstance(event, Broke):
            status, message = Status.FAILED, event.message
    return status, message


def run(revision: Revision, events: list[Event]) -> list[Task]:
    """The task after each event, at times 1, 2, ..."""
    task = fresh(revision)
    seen = [task]
    for now, event in enumerate(events, 1):
        task = step(task, event, now)
        seen.append(task)
    return seen


def sequences(length: int) -> list[list[Event]]:
    return [list(events) for n in range(length + 1) for events in itertools.product(EVENTS, repeat=n)]


@pytest.mark.parametrize("revision", list(Revision))
def test_tasks_step_matches_the_reference_over_every_short_sequence(revision: Revision) -> None:
    for events in sequences(4):
        last = run(revision, events)[-1]
        assert (last.status, last.message) == reference(revision, events), events


@given(st.sampled_from(list(Revision)), st.lists(st.sampled_from(EVENTS), max_size=30))
def test_tasks_step_matches_the_reference(revision: Revision, events: list[Event]) -> None:
    last = run(revision, events)[-1]
    assert (last.status, last.message) == reference(revision, events)


@given(st.sampled_from(list(Revision)), st.lists(st.sampled_from(EVENTS), max_size=30))
def test_tasks_end_once_and_an_ended_task_never_changes(revision: Revision, events: list[Event]) -> None:
    seen = run(revision, events)
    for before, after in itertools.pairwise(seen):
        if before.ended:
            assert after == before
        assert after.updated_ms >= before.updated_ms
        assert (after.ended_ms is not None) == after.ended
        assert after.id == before.id and after.created_ms == before.created_ms and after.ttl_ms == before.ttl_ms
    ends = [after for before, after in itertools.pairwise(seen) if after.ended and not before.ended]
    assert len(ends) == (1 if seen[-1].ended else 0)
    assert all(task.status is Status.WORKING or task.status in ENDED for task in seen)


def test_tasks_transition_table_names_every_working_case() -> None:
    kinds = {type(event) for event in EVENTS}
    assert set(TRANSITIONS) == {(asked, kind) for asked in (False, True) for kind in kinds}


@pytest.mark.parametrize(("revision", "is_error", "status"), [
    (Revision.UTILITY, False, Status.COMPLETED),
    (Revision.UTILITY, True, Status.FAILED),
    (Revision.EXTENSION, False, Status.COMPLETED),
    (Revision.EXTENSION, True, Status.COMPLETED),
])  # fmt: skip
def test_tasks_end_status_of_a_tool_error_is_failed_only_under_the_utility(
    revision: Revision, is_error: bool, status: Status
) -> None:
    assert end_status(revision, is_error=is_error) is status


@pytest.mark.parametrize("tool", TASK_TOOLS)
def test_tasks_next_step_follows_a_detached_job_or_running_children_only(tool: str) -> None:
    for detached, running in itertools.product((None, "job-1"), (False, True)):
        found = next_step(tool, detached_job=detached, children_running=running)
        if tool == "collect":
            assert found == (Again() if running else Done())
        else:
            assert found == (Wait(detached) if detached is not None else Done())


def test_tasks_cancel_plan_ends_the_known_job_else_the_call() -> None:
    assert cancel_plan("job-1") == CancelJob("job-1")
    assert cancel_plan(None) == CancelCall()


@pytest.mark.parametrize("revision", list(Revision))
@pytest.mark.parametrize("status", list(Status))
def test_tasks_cancel_verdict(revision: Revision, status: Status) -> None:
    task = replace(fresh(revision), status=status, ended_ms=None if status is Status.WORKING else 1)
    verdict = cancel_verdict(task)
    asked = cancel_verdict(step(task, CancelAsked(), 1))
    if status is Status.WORKING:
        assert (verdict, asked) == (Proceed(), Join()), "a second cancel joins the first"
    elif revision is Revision.UTILITY:
        assert verdict == Refuse(f"Cannot cancel task: already in terminal status '{status.value}'")
    else:
        assert verdict == Acknowledge()


@given(st.none() | st.integers(-(10**12), 10**12))
def test_tasks_ttl_for_holds_a_requested_ttl_within_its_bounds(requested: int | None) -> None:
    ttl = ttl_for(requested)
    assert MIN_TTL_MS <= ttl <= MAX_TTL_MS
    if requested is None:
        assert ttl == TTL_MS
    elif MIN_TTL_MS <= requested <= MAX_TTL_MS:
        assert ttl == requested


tasks = st.builds(
    Task,
    id=st.text("abcdef", min_size=1, max_size=4),
    revision=st.sampled_from(list(Revision)),
    created_ms=st.integers(0, 1000),
    updated_ms=st.just(0),
    ttl_ms=st.integers(1, 2000),
    status=st.sampled_from(list(Status)),
    ended_ms=st.integers(1000, 3000),
).map(lambda task: replace(task, ended_ms=None) if task.status is Status.WORKING else task)


@given(tasks, st.integers(0, 6000))
def test_tasks_expire_only_once_ended_for_their_ttl_and_report_that_ttl(task: Task, now: int) -> None:
    if task.ended_ms is None:
        assert not expired(task, now)
        assert task.created_ms + reported_ttl(task, now) == now + task.ttl_ms
    else:
        assert expired(task, now) == (now - task.ended_ms >= task.ttl_ms)
        assert task.created_ms + reported_ttl(task, now) == task.ended_ms + task.ttl_ms


def test_tasks_expire_at_exactly_their_ttl_after_their_end() -> None:
    for ended_ms, ttl_ms, now in itertools.product(range(4), range(1, 4), range(8)):
        task = replace(fresh(Revision.UTILITY), status=Status.COMPLETED, ended_ms=ended_ms, ttl_ms=ttl_ms)
        assert expired(task, now) == (now >= ended_ms + ttl_ms), (ended_ms, ttl_ms, now)


@given(st.lists(tasks, max_size=12, unique_by=lambda task: task.id), st.integers(0, 6000), st.integers(1, 8))
def test_tasks_admit_drops_the_expired_then_the_oldest_ended_and_never_a_working_task(
    held: list[Task], now: int, bound: int
) -> None:
    verdict = admit(held, now, bound)
    live = [task for task in held if not expired(task, now)]
    working = [task for task in live if not task.ended]
    if isinstance(verdict, Full):
        assert len(working) + 1 > bound
        return
    assert isinstance(verdict, Admit)
    dropped = set(verdict.drop)
    assert len(dropped) == len(verdict.drop)
    assert {task.id for task in held if expired(task, now)} <= dropped
    assert not any(task.id in dropped for task in working)
    left = [task for task in held if task.id not in dropped]
    assert len(left) + 1 <= bound
    ended_dropped = [task for task in live if task.id in dropped]
    ended_kept = [task for task in live if task.ended and task.id not in dropped]
    if ended_dropped:  # no more than needed, and the oldest ended first
        assert len(left) + 1 == bound
        newest_dropped = max((task.ended_ms or 0, task.created_ms) for task in ended_dropped)
        assert all(newest_dropped <= (task.ended_ms or 0, task.created_ms) for task in ended_kept)
