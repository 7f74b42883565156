"""Laws of a prompt child's loop (`eukhe.core.agent`): its end conditions as a table, the bounded retries that honour
Retry-After, the usage sums, and the reading of any reply into tool calls, an answer, or a problem."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import agent as core
from eukhe.core.agent import ENDED, TRANSITIONS, Event, GiveUp, Loop, LoopError, Phase, Retry, RetryPolicy

PHASES = list(Phase)
EVENTS = list(Event)


def drive(max_turns: int, events: list[Event]) -> tuple[Loop, int]:
    """Feed events while the loop takes them; the loop and how many it took."""
    loop = core.start(max_turns)
    taken = 0
    for event in events:
        if loop.ended or (loop.phase, event) not in TRANSITIONS:
            break
        loop = core.step(loop, event)
        taken += 1
    return loop, taken


# --- the loop's table -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("phase", "event"), list(itertools.product(PHASES, EVENTS)))
def test_loop_every_phase_and_event_is_a_listed_transition_or_a_refusal(phase: Phase, event: Event) -> None:
    """Exhaustive: each (phase, event) is the table's next phase, or LoopError; an ended loop takes nothing."""
    for turns in range(3):
        loop = Loop(max_turns=5, phase=phase, turns=turns)
        if (phase, event) in TRANSITIONS:
            assert phase not in ENDED
            after = core.step(loop, event)
            assert after.phase in (TRANSITIONS[phase, event], Phase.STALLED)
        else:
            with pytest.raises(LoopError):
                core.step(loop, event)


def test_loop_ended_phases_take_no_event() -> None:
    for phase, event in itertools.product(ENDED, EVENTS):
        assert (phase, event) not in TRANSITIONS


@given(st.integers(0, 6), st.lists(st.sampled_from(EVENTS), max_size=40))
def test_loop_ends_within_max_turns(max_turns: int, events: list[Event]) -> None:
    """However the model replies, the loop asks it at most max_turns times: past them it is stalled, never thinking."""
    loop, _ = drive(max_turns, events)
    assert loop.turns <= max_turns
    if loop.turns == max_turns and not loop.ended:
        assert loop.phase is Phase.ACTING  # the last reply's tools run; then the loop stalls


def test_loop_ends_within_max_turns_exhaustively() -> None:
    """Every sequence of up to 7 replies-and-runs, for max_turns 0 to 3: the model is asked at most max_turns
    times, and a loop whose tools ran on its last turn is stalled."""
    cycle = [Event.TOOLS_ASKED, Event.TOOLS_RAN]
    for max_turns in range(4):
        loop = core.start(max_turns)
        asked = 0
        while not loop.ended:
            for event in cycle:
                loop = core.step(loop, event)
            asked += 1
            assert asked <= max_turns
        assert loop.phase is Phase.STALLED
        assert loop.turns == max_turns


@given(st.integers(1, 6), st.lists(st.sampled_from(EVENTS), max_size=40))
def test_loop_answer_ends_as_answered(max_turns: int, events: list[Event]) -> None:
    """A reply without a tool call, or the `answer` tool, ends the loop answered, from any point it is taken."""
    loop, _ = drive(max_turns, events)
    if loop.phase is Phase.THINKING:
        assert core.step(loop, Event.REPLIED).phase is Phase.ANSWERED
    if loop.phase is Phase.ACTING:
        assert core.step(loop, Event.ANSWER_CALLED).phase is Phase.ANSWERED


@given(st.integers(1, 6), st.lists(st.sampled_from(EVENTS), max_size=40), st.sampled_from(
    [Event.TIMED_OUT, Event.CANCELLED]
))  # fmt: skip
def test_loop_timeout_and_cancel_end_it_from_any_running_phase(max_turns: int, events: list[Event], end: Event) -> None:
    loop, _ = drive(max_turns, events)
    if not loop.ended:
        expected = Phase.STALLED if end is Event.TIMED_OUT else Phase.CANCELLED
        assert core.step(loop, end).phase is expected


# --- retries --------------------------------------------------------------------------------------------------------

statuses = st.one_of(st.none(), st.integers(100, 599))
policies = st.builds(
    RetryPolicy,
    max_retries=st.integers(0, 6),
    backoff_ms=st.integers(0, 5_000),
    max_backoff_ms=st.integers(0, 20_000),
    max_retry_after_ms=st.integers(0, 120_000),
)
retry_afters = st.one_of(st.none(), st.integers(0, 500).map(str), st.text(max_size=8))


@given(policies, st.lists(st.tuples(statuses, retry_afters), min_size=1, max_size=12))
def test_retry_is_bounded(policy: RetryPolicy, failures: list[tuple[int | None, str | None]]) -> None:
    """Whatever fails, at most max_retries + 1 attempts are made, and no wait is longer than the policy's caps."""
    attempts = 0
    for number, (status, after) in enumerate(failures, start=1):
        attempts += 1
        decision = core.after_failure(number, status, after, policy)
        if isinstance(decision, GiveUp):
            break
        assert 0 <= decision.delay_ms <= max(policy.max_backoff_ms, policy.max_retry_after_ms)
    assert attempts <= policy.max_retries + 1


@pytest.mark.parametrize("status", [None, 429, 500, 502, 503, 599, 400, 401, 403, 404, 422])
def test_retry_only_429_5xx_and_connection_errors(status: int | None) -> None:
    decision = core.after_failure(1, status, None, RetryPolicy())
    assert isinstance(decision, Retry) == (status is None or status == 429 or status >= 500)


@given(policies, st.integers(1, 6), st.integers(0, 300))
def test_retry_honours_retry_after(policy: RetryPolicy, failures: int, seconds: int) -> None:
    decision = core.after_failure(failures, 429, str(seconds), policy)
    if failures > policy.max_retries:
        assert decision == GiveUp(retryable=True)
    else:
        assert decision == Retry(min(seconds * 1000, policy.max_retry_after_ms))


def test_retry_backoff_doubles_to_its_cap() -> None:
    policy = RetryPolicy(max_retries=6, backoff_ms=100, max_backoff_ms=500)
    delays = [core.after_failure(n, 500, None, policy) for n in range(1, 8)]
    assert delays == [Retry(100), Retry(200), Retry(400), Retry(500), Retry(500), Retry(500), GiveUp(retryable=True)]


@pytest.mark.parametrize(
    ("header", "ms"), [("0", 0), ("2", 2000), ("1.5", 1500), (" 3 ", 3000), ("-1", None), ("nan", None),
                       ("inf", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None), (None, None)]
)  # fmt: skip
def test_retry_after_reads_delta_seconds(header: str | None, ms: int | None) -> None:
    assert core.retry_after_ms(header) == ms


# --- usage ----------------------------------------------------------------------------------------------------------

usages = st.builds(
    core.Usage,
    st.integers(0, 10**9),
    st.integers(0, 10**9),
    st.integers(0, 10**9),
    st.integers(0, 100),
    st.integers(0, 100),
)


@given(usages, usages, usages)
def test_usage_sums_are_associative_with_zero_as_identity(a: core.Usage, b: core.Usage, c: core.Usage) -> None:
    assert a.plus(b).plus(c) == a.plus(b.plus(c))
    assert a.plus(core.Usage()) == a == core.Usage().plus(a)
    assert a.plus(b) == b.plus(a)


@given(st.lists(usages, max_size=8))
def test_usage_sums_every_field(parts: list[core.Usage]) -> None:
    total = core.Usage()
    for part in parts:
        total = total.plus(part)
    assert total.total_tokens == sum(p.total_tokens for p in parts)
    assert total.model_calls == sum(p.model_calls for p in parts)


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_usage_of_a_reply_counts_one_model_call(prompt: int, completion: int) -> None:
    body = {"usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    assert core.usage_of(body) == core.Usage(prompt, completion, prompt + completion, 1, 0)
    assert core.usage_of({}) == core.Usage(model_calls=1)


# --- reading a reply ------------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
keys = st.sampled_from(["choices", "message", "content", "tool_calls", "function", "name", "arguments", "id"])
shaped = st.recursive(
    st.none() | st.text(max_size=5) | st.integers(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=16,
)


@given(st.one_of(json_values, shaped))
def test_read_reply_takes_any_body_and_never_raises(body: Any) -> None:
    """Any JSON value reads as tool calls, an answer, or a named problem: a bad reply never crashes the loop."""
    reply = core.read_reply(body)
    assert isinstance(reply, core.ToolsAsked | core.Replied | core.Unusable)
    if isinstance(reply, core.ToolsAsked):
        assert reply.calls
        assert json.dumps(reply.message)  # the assistant message kept is JSON
    if isinstance(reply, core.Unusable):
        assert reply.problem


def test_read_reply_tool_calls_then_text() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    body = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    reply = core.read_reply(body)
    assert reply == core.ToolsAsked(
        content=None,
        calls=(core.AskedCall("c1", "bash", '{"command": "ls"}'),),
        message={"role": "assistant", "content": None, "tool_calls": [call]},
    )
    text = core.read_reply({"choices": [{"message": {"content": "done", "tool_calls": []}}]})
    assert text == core.Replied("done", {"role": "assistant", "content": "done"})


@given(st.text(max_size=30))
def test_read_arguments_is_an_object_or_a_problem(text: str) -> None:
    read = core.read_arguments(text)
    assert isinstance(read, dict | str)


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_read_arguments_round_trips_an_object(value: dict[str, Any]) -> None:
    assert core.read_arguments(json.dumps(value)) == value
