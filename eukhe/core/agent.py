"""The decisions of a prompt child's loop (spec S3 "A subagent's workspace": a child run by a model).

Everything the loop decides lives here, free of I/O: what a Chat Completions reply asks for (`read_reply`: tool
calls, an answer, or a reply the child cannot use), whether a failed request is tried again and after how long
(`after_failure`, honouring Retry-After), the usage summed over the child's model calls (`Usage`), and when the loop
ends (`step`: its phases and events are a table, as in h11's `_state.py`).

Theory of operation: the shell asks the model (THINKING); a reply with tool calls moves the loop to ACTING, where the
shell runs them and feeds TOOLS_RAN (back to THINKING while turns are left, else STALLED) or ANSWER_CALLED; a reply
without a tool call is the answer. A timeout, a model that failed after its retries, or a cancel end the loop from
either phase. An ended loop takes no event.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any


class Phase(enum.Enum):
    """Where a child's loop is."""

    THINKING = "thinking"  # a request to the model is on its way
    ACTING = "acting"  # the reply's tool calls run
    ANSWERED = "answered"  # ended: the child answered (the `answer` tool, or a reply with no tool call)
    STALLED = "stalled"  # ended: its turns were spent, or its timeout passed
    FAILED = "failed"  # ended: the model failed after its retries
    CANCELLED = "cancelled"  # ended: its parent cancelled it


class Event(enum.Enum):
    """What the shell tells the loop."""

    TOOLS_ASKED = "tools_asked"  # the model replied with tool calls
    REPLIED = "replied"  # the model replied without a tool call: its text is the answer
    ANSWER_CALLED = "answer_called"  # a tool call was `answer`
    TOOLS_RAN = "tools_ran"  # every tool call of the reply ran
    TIMED_OUT = "timed_out"  # the child's timeout passed
    MODEL_FAILED = "model_failed"  # the model failed after its retries
    CANCELLED = "cancelled"  # the parent cancelled the child


ENDED = frozenset({Phase.ANSWERED, Phase.STALLED, Phase.FAILED, Phase.CANCELLED})

TRANSITIONS: dict[tuple[Phase, Event], Phase] = {
    (Phase.THINKING, Event.TOOLS_ASKED): Phase.ACTING,
    (Phase.THINKING, Event.REPLIED): Phase.ANSWERED,
    (Phase.THINKING, Event.TIMED_OUT): Phase.STALLED,
    (Phase.THINKING, Event.MODEL_FAILED): Phase.FAILED,
    (Phase.THINKING, Event.CANCELLED): Phase.CANCELLED,
    (Phase.ACTING, Event.ANSWER_CALLED): Phase.ANSWERED,
    (Phase.ACTING, Event.TOOLS_RAN): Phase.THINKING,  # unless the turns are spent: then STALLED (see `step`)
    (Phase.ACTING, Event.TIMED_OUT): Phase.STALLED,
    (Phase.ACTING, Event.CANCELLED): Phase.CANCELLED,
}
"""The loop's transitions. Every pair not listed is refused (`LoopError`)."""


class LoopError(ValueError):
    """An event the loop's phase does not take (a bug in the shell)."""


@dataclass(frozen=True, slots=True)
class Loop:
    """A child's loop: its phase, the model replies it had (`turns`) and how many it may have."""

    max_turns: int
    phase: Phase = Phase.THINKING
    turns: int = 0

    @property
    def ended(self) -> bool:
        return self.phase in ENDED


def step(loop: Loop, event: Event) -> Loop:
    """The loop after `event`. A reply counts a turn; tools that ran on the last turn stall the loop."""
    after = TRANSITIONS.get((loop.phase, event))
    if after is None:
        raise LoopError(f"a loop {loop.phase.value} takes no {event.value}")
    turns = loop.turns + 1 if event in (Event.TOOLS_ASKED, Event.REPLIED) else loop.turns
    if after is Phase.THINKING and turns >= loop.max_turns:
        after = Phase.STALLED
    return Loop(max_turns=loop.max_turns, phase=after, turns=turns)


def start(max_turns: int) -> Loop:
    """A new loop: thinking, unless it may not ask the model even once (then stalled)."""
    return Loop(max_turns=max_turns, phase=Phase.THINKING if max_turns > 0 else Phase.STALLED)


# --- usage ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    """What a child used, summed over its model calls: tokens, model calls, tool calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0

    def plus(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            model_calls=self.model_calls + other.model_calls,
            tool_calls=self.tool_calls + other.tool_calls,
        )


def _count(value: Any) -> int:
    """A token count as a reply gives it (a non-negative int), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_of(reply: Any) -> Usage:
    """One model call's usage, from a reply's `usage` (absent or malformed counts are 0; total defaults to the sum)."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    if not isinstance(usage, dict):
        return Usage(model_calls=1)
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    total = _count(usage.get("total_tokens")) if "total_tokens" in usage else prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, model_calls=1)


# --- a reply --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AskedCall:
    """One tool call a reply asks for: its id, the tool's name, its arguments as the model wrote them (JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolsAsked:
    """A reply with tool calls (and maybe some text), as the assistant message to keep."""

    content: str | None
    calls: tuple[AskedCall, ...]
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Replied:
    """A reply without a tool call: its text is the child's answer."""

    text: str
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Unusable:
    """A reply the child cannot use; the model is told the problem and the loop goes on."""

    problem: str


Reply = ToolsAsked | Replied | Unusable


def read_reply(body: Any) -> Reply:
    """What a Chat Completions response body asks for: `choices[0].message`'s tool calls, else its text."""
    if not isinstance(body, dict):
        return Unusable("the response is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Unusable("the response has no choices[0]")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return Unusable("choices[0] has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        return Unusable("choices[0].message.content is not a string")
    asked = message.get("tool_calls")
    if asked is None or asked == []:
        return Replied(text=content or "", message={"role": "assistant", "content": content or ""})
    if not isinstance(asked, list):
        return Unusable("choices[0].message.tool_calls is not a list")
    calls: list[AskedCall] = []
    for index, call in enumerate(asked):
        where = f"choices[0].message.tool_calls[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return Unusable(f"{where} has no function name")
        call_id = call.get("id")
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)  # a server that sends an object rather than its JSON text
        name = function["name"]
        calls.append(
            AskedCall(id=call_id if isinstance(call_id, str) else f"call_{index}", name=name, arguments=arguments)
        )
    kept = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }
    return ToolsAsked(content=content, calls=tuple(calls), message=kept)


def read_arguments(text: str) -> dict[str, Any] | str:
    """A tool call's arguments: the object the JSON text holds, or the problem with it (a string)."""
    if text.strip() == "":
        return {}
    try:
        value = json.loads(text)
    except ValueError as error:
        return f"the arguments are not JSON: {error}"
    if not isinstance(value, dict):
        return f"the arguments are not a JSON object: {text[:80]!r}"
    return value


# --- retries --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed model request is tried again: at most `max_retries` more times, after `backoff_ms` doubling up
    to `max_backoff_ms`, or after what Retry-After says (up to `max_retry_after_ms`)."""

    max_retries: int = 4
    backoff_ms: int = 500
    max_backoff_ms: int = 8_000
    max_retry_after_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class Retry:
    """Ask again after `delay_ms`."""

    delay_ms: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The model failed: no more attempts."""

    retryable: bool  # False: the failure is not one a retry can mend (a 4xx other than 429)


CONNECTION_FAILED: None = None
"""The `status` of a failure that got no HTTP answer (a refused or cut connection)."""


def retryable(status: int | None) -> bool:
    """A 429, a 5xx, or no answer at all (a connection error) may be tried again; any other status may not."""
    return status is None or status == 429 or 500 <= status <= 599


def retry_after_ms(header: str | None) -> int | None:
    """A Retry-After header's delay in ms (delta-seconds; an HTTP date or junk: None)."""
    if header is None:
        return None
    try:
        seconds = float(header.strip())
    except ValueError:
        return None
    if not 0 <= seconds < float("inf"):  # also refuses NaN
        return None
    return int(seconds * 1000)


def after_failure(failures: int, status: int | None, retry_after: str | None, policy: RetryPolicy) -> Retry | GiveUp:
    """After the `failures`-th failed attempt (1-based) with `status` (None: a connection error): try again, or not."""
    if not retryable(status):
        return GiveUp(retryable=False)
    if failures > policy.max_retries:
        return GiveUp(retryable=True)
    said = retry_after_ms(retry_after)
    if said is not None:
        return Retry(min(said, policy.max_retry_after_ms))
    return Retry(min(policy.backoff_ms * 2 ** min(failures - 1, 30), policy.max_backoff_ms))
