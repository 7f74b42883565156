"""A child's run: its code as one cell in the child's kernel, then its answer; or its prompt, worked on by a model.

The run is pluggable: a `ChildHost` runs a `RunRequest` however it hosts the child (in this process, or in the
child's own worker); this module is the code run, shared by both. The prompt run (a model's loop over the session's
tool calls) lives with the tool calls, a layer above (`eukhe.calls.child_loop`), which plugs it in here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from eukhe.errors import CodedError
from eukhe.records.children import ChildError, ChildErrorReason, RunEnd, RunRequest
from eukhe.records.jobs import Detached, Settled

if TYPE_CHECKING:
    from eukhe.children.family import AgentSession
    from eukhe.kernel.session_kernel import KernelSession

PromptRun = Callable[["AgentSession", RunRequest, Callable[[str], None]], Awaitable[RunEnd]]
"""A prompt child's run: the session, the request (prompt, provider, key), where its `message_parent` texts go."""

_PLUGGED: list[PromptRun] = []


def plug_prompt_run(run: PromptRun) -> None:
    """Make `run` the prompt run of every child session in this process (`eukhe.calls` does, when imported)."""
    _PLUGGED[:] = [run]


def prompt_run() -> PromptRun:
    """The prompt run plugged in (an internal error when nothing imported `eukhe.calls`)."""
    if not _PLUGGED:
        raise CodedError("internal", "no prompt run is plugged in: import eukhe.calls (eukhe.api does)")
    return _PLUGGED[0]


NO_TIMEOUT_MS = 10 * 365 * 86_400_000
"""A run without `timeout_ms` is never stalled (ten years stands for never)."""

TAKE_LAST_VALUE = "__import__('rlm').answer(_)"
"""The cell that makes a run's last expression its answer when the code did not call `rlm.answer` (the kernel sets
`_` to a cell's last value when it is not None, as IPython does)."""

_FAILURES: dict[str, ChildErrorReason] = {
    "interrupted": "interrupted",
    "died": "kernel_died",
    "fault": "kernel_died",
    "killed": "kernel_died",
}


class AnswerSlot:
    """Where a child's `rlm.answer(value)` lands (the host request `child.answer`)."""

    def __init__(self) -> None:
        self.given = False
        self.value: Any = None

    def take(self, value: Any) -> None:
        self.given = True
        self.value = value


async def run_child_code(session: KernelSession, slot: AnswerSlot, request: RunRequest) -> RunEnd:
    """Run `request.code` as one cell in `session`'s kernel; answered with its answer, failed, or stalled past
    `timeout_ms` (the cell is left running: stopping the child ends it)."""
    budget = NO_TIMEOUT_MS if request.timeout_ms is None else request.timeout_ms
    assert request.code is not None, "a code run has code"
    end = await session.cells.ipython(request.code, budget)
    if isinstance(end, Detached):
        message = f"the run did not end within its timeout of {request.timeout_ms} ms"
        return RunEnd(status="stalled", error=ChildError(reason="stalled", message=message))
    if end.outcome == "ok":
        if not slot.given and end.result is not None:
            taken = await session.cells.ipython(TAKE_LAST_VALUE, NO_TIMEOUT_MS)
            if isinstance(taken, Settled) and taken.outcome != "ok" and not slot.given:
                slot.take(end.result)  # not JSON, not sendable: the value's repr stands for it
        return RunEnd(status="answered", answer=slot.value if slot.given else None)
    if end.outcome == "error" and end.error is not None:
        message = f"{end.error.ename}: {end.error.evalue}"
        return RunEnd(
            status="failed", error=ChildError(reason="exception", message=message, traceback=end.error.traceback)
        )
    reason = _FAILURES.get(end.outcome or "", "kernel_died")
    return RunEnd(status="failed", error=ChildError(reason=reason, message=f"the run's cell ended: {end.outcome}"))
