"""A session's tool calls: every call a model makes runs through the session's Harness (S2 "A tool call").

`ToolCalls` registers the catalog's tools on the session's Harness and runs one call at a time per request: the
Harness journals its start (the tool, its arguments, the id of the job it will run) and its settle (slot `done` and
the `tool_result` entry: the text the model reads, the tool's answer record as details, every warning, all usage),
nothing between. While a call runs its progress goes on the session's board: the row and last output lines of the
job it runs (a bash command, a cell), or how many of the children it awaits have ended, published on each change
(looked at every PROGRESS_MS) and read by `eukhe watch` and MCP progress alike.

`calls_of` lists a session's calls from its committed state (`eukhe session calls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from eukhe.calls import texts
from eukhe.calls.catalog import CALL_TOOLS, CallTool, Running
from eukhe.children.family import AgentSession
from eukhe.clock import sleep_ms
from eukhe.core import clients
from eukhe.core import job as core
from eukhe.core.bound import Keep, Off, On, OutputLimits
from eukhe.core.render import render
from eukhe.errors import UsageError
from eukhe.harness.harness import UnknownToolError
from eukhe.harness.tool import ToolExecutionApi, ToolRegistration
from eukhe.jobs.job import Job
from eukhe.jobs.wait import CallCancelledError
from eukhe.output import narrow, save_artifact
from eukhe.records.base import Record
from eukhe.records.daemon import CallBegan, CallList, CallLive, CallRow, CallStarted, ResultRoom, ToolCallAnswer
from eukhe.records.fs import GlobAnswer, GrepAnswer, ReadAnswer
from eukhe.records.jobs import Detached, Settled
from eukhe.records.output import OutputWindow
from eukhe.store.tree import Slot

PROGRESS_MS = 200
"""How often a running call's job is looked at for a change to publish."""
CHILDREN_PROGRESS_MS = 1000
"""How often a running `collect` reads the roster."""
TAIL_LINES = 5
TAIL_BYTES = 1024
ARGS_SHOWN = 200
SUMMARY_SHOWN = 120

EventListener = Callable[[Record], None]


def answer_now(job: Job) -> Settled | Detached:
    """A job's answer as it stands: its end if it ended, else the output so far."""
    verdict: core.EndedInTime | core.DeadlinePassed = (
        core.EndedInTime(job.end) if job.end is not None else core.DeadlinePassed(0)
    )
    return job.answer(verdict, 0)


def cancelled_answer(session: AgentSession, started: list[str]) -> Settled | Detached | None:
    """What a cancelled call answers: how the job it started stands now (None when it started none)."""
    job = session.job_table.get(started[0]) if started else None
    return None if job is None else answer_now(job)


def tail_of(text: bytes) -> str:
    """The last lines of an output so far, rendered as the model would read them (at most TAIL_LINES lines and
    TAIL_BYTES bytes)."""
    last = text[-TAIL_BYTES:]
    shown = render(last).splitlines()[-TAIL_LINES:]
    return "\n".join(shown)


class _Progress:
    """A running call's progress: what it watches (its job, or the children it awaits) and when it began."""

    def __init__(self, session: AgentSession, api: ToolExecutionApi) -> None:
        self.session = session
        self.api = api
        self.clock = session.job_table.clock
        self.began_ms = self.clock.now_ms()
        self.job: Job | None = None
        self._seen: object = None

    def live(self, job: Job) -> None:
        """The job that holds the call's output: looked at from the first tick on (a call that ends sooner, most
        calls, never builds a progress report)."""
        self.job = job

    def look(self) -> None:
        """Publish the call's progress if it changed since the last look."""
        job = self.job
        if job is None:
            return
        row = job.row()
        key = (job.id, row.bytes_kept, row.bytes_dropped, row.lines_kept, row.lines_dropped, row.status)
        if key == self._seen:
            return
        self._seen = key
        now = self.clock.now_ms()
        live = CallLive(
            elapsed_ms=now - self.began_ms,
            job=row,
            tail=tail_of(job.snapshot().text),
            job_elapsed_ms=max(0, now - job.started_ms),
        )
        self.api.details(live.to_json())
        self.api.publish_progress()

    async def follow_job(self) -> None:
        while True:
            await sleep_ms(self.clock, PROGRESS_MS)
            self.look()

    async def follow_children(self, names: list[str] | None) -> None:
        while True:
            rows = [row for row in self.session.children.list() if names is None or row.name in names]
            running = [row.name for row in rows if row.status == "running"]
            if (len(rows), running) != self._seen:
                self._seen = (len(rows), running)
                elapsed = self.clock.now_ms() - self.began_ms
                live = CallLive(
                    elapsed_ms=elapsed,
                    children_awaited=len(rows),
                    children_ended=len(rows) - len(running),
                    children_running=running,
                )
                self.api.details(live.to_json())
                self.api.publish_progress()
            await sleep_ms(self.clock, CHILDREN_PROGRESS_MS)


def warnings_of(answer: Record) -> list[str]:
    """What a call's answer warns the model of: a run that outlived its budget, an output cut at the bound."""
    found: list[str] = []
    if isinstance(answer, Detached):
        found.append(f"the run outlived its budget ({answer.budget_ms} ms): it goes on as job {answer.job}")
    output = getattr(answer, "output", None)
    if isinstance(output, OutputWindow) and output.bytes_dropped:
        where = f"; all of it is in {output.artifact}" if output.artifact else ""
        found.append(f"output bounded: {output.bytes_dropped} bytes dropped{where}")
    return found


HEAD_WINDOWS = (ReadAnswer, GrepAnswer, GlobAnswer)
"""Answers whose window is the head of what they found (a file's lines, a listing): a cut keeps the head."""
FIT_TRIES = 4
"""How many times a window is cut smaller when its rendered text still overflows a client's room."""


Save = Callable[[bytes], tuple[Path | None, str | None]]


def fitted(tool: CallTool, answer: Record, room: clients.ResultRoom, keep: Keep, save: Save) -> tuple[Record, str]:
    """The answer and its text for a client that shows `room` whole: the output window cut (`eukhe.output.narrow`)
    until the rendered text fits, with its counts and notice over the whole output (a window that was whole is
    kept by `save` first); a text that still does not fit (not an output window) is clipped, saying so. `keep`: the
    end a window keeps when it was not cut before."""
    text = tool.text(answer)
    output = getattr(answer, "output", None)
    if isinstance(output, OutputWindow) and not _fits(text, room):
        if output.notice is not None:
            keep = Keep.TAIL if texts.CUT_AT_START in output.notice else Keep.HEAD
        elif isinstance(answer, HEAD_WINDOWS):
            keep = Keep.HEAD
        limits = clients.output_limits(room, keep)
        saved: list[tuple[Path | None, str | None]] = []

        def save_once(raw: bytes) -> tuple[Path | None, str | None]:
            if not saved:
                saved.append(save(raw))
            return saved[0]

        for _ in range(FIT_TRIES):
            answer = msgspec.structs.replace(answer, output=narrow(output, limits, save_once))
            text = tool.text(answer)
            if _fits(text, room):
                return answer, text
            limits = clients.shrunk(limits, len(text.encode("utf-8", "surrogatepass")), room)
    if not _fits(text, room):
        text = texts.clip(text, OutputLimits(room.max_bytes - clients.FRAME_BYTES, room.max_lines - 1, Keep.HEAD))
    return answer, text


def _fits(text: str, room: clients.ResultRoom) -> bool:
    return clients.fits(len(text.encode("utf-8", "surrogatepass")), text.count("\n") + 1, room)


class ToolCalls:
    """The tool calls of one session: the catalog's tools on its Harness (one per session: `ToolCalls.of`)."""

    @classmethod
    def of(cls, session: AgentSession) -> ToolCalls:
        """The session's tool calls, made on first use (a second `ToolCalls` would take over its Harness's tools)."""
        calls = _OF_SESSION.get(session)
        if calls is None:
            calls = _OF_SESSION[session] = cls(session)
        return calls

    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self._listeners: dict[str, EventListener] = {}
        self._cancels: dict[str, list[CallCancelledError]] = {}
        self._keys: dict[str, str] = {}  # a call's API key for a prompt child's spawn (in memory only)
        self._rooms: dict[str, clients.ResultRoom] = {}  # what a call's client shows its model whole
        for tool in CALL_TOOLS.values():
            session.harness.register(
                ToolRegistration(
                    tool.name, tool.args, self._executor(tool), truncation=Off(), runs_job=tool.runs_job is not None
                )
            )

    async def call(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        on_event: EventListener | None = None,
        api_key: str | None = None,
        call_id: str | None = None,
        room: ResultRoom | None = None,
    ) -> ToolCallAnswer:
        """Run one tool call to its settle. `on_event` hears its start (`call_started`, with the call id) and the
        id of the job it runs (`started`); `api_key` is the key a `spawn` of a prompt child uses (never journaled);
        `call_id` the call's id (default: a fresh one); `room` what the asking client hands its model whole (the
        answer and its text are cut to fit: `fitted`).
        A refusal (a bad argument, an unknown job, a file tool's reason) raises
        once the call settled as failed; a cancelled call raises CallCancelledError with how its job ended."""
        self.session.check_open()
        if tool not in CALL_TOOLS:
            raise UnknownToolError(tool)
        call_id = call_id or f"call-{secrets.token_hex(6)}"
        cancelled: list[CallCancelledError] = []
        self._listeners[call_id] = on_event or _nobody
        self._cancels[call_id] = cancelled
        if api_key is not None:
            self._keys[call_id] = api_key
        if room is not None:
            self._rooms[call_id] = clients.ResultRoom(room.max_bytes, room.max_lines)
        try:
            result = await self.session.harness.call(tool, args, call_id=call_id, raise_failure=True)
        except asyncio.CancelledError:
            if cancelled:
                raise cancelled[0] from None
            raise
        finally:
            self._listeners.pop(call_id, None)
            self._cancels.pop(call_id, None)
            self._keys.pop(call_id, None)
            self._rooms.pop(call_id, None)
        return ToolCallAnswer(
            call=result.call_id,
            tool=result.tool,
            status=result.status,
            text=result.output.text,
            answer=result.details,
            warnings=list(result.warnings),
            usage=result.usage_totals,
            entry=result.entry_id,
        )

    def calls(self, call: str | None = None) -> CallList:
        """The session's tool calls (`calls_of`); with `call`, that call's settle whole."""
        return calls_of(self.session, call)

    def _executor(self, tool: CallTool) -> Callable[[Any, ToolExecutionApi], Any]:
        async def execute(args: Record, api: ToolExecutionApi) -> str:
            return await self._execute(tool, args, api)

        return execute

    async def _execute(self, tool: CallTool, args: Record, api: ToolExecutionApi) -> str:
        """Run the tool; its answer is the call's details, its text the call's output."""
        hear = self._listeners.get(api.call_id, _nobody)
        hear(CallBegan(call=api.call_id, tool=tool.name))
        progress = _Progress(self.session, api)
        started: list[str] = []

        def on_started(job_id: str) -> None:
            started.append(job_id)
            hear(CallStarted(job=job_id, kind=tool.runs_job or "bash"))

        follower: asyncio.Task[None] | None = None
        if tool.progress == "job":
            follower = asyncio.create_task(progress.follow_job())
        elif tool.progress == "children":
            names = getattr(args, "names", None)
            follower = asyncio.create_task(progress.follow_children(names))
        try:
            running = Running(api, on_started, progress.live, self._keys.get(api.call_id))
            answer = await tool.run(self.session, args, running)
        except asyncio.CancelledError:
            now = cancelled_answer(self.session, started)
            if now is not None:
                api.details(now.to_json())
                api.output(texts.answer_text(now))
                self._cancels.get(api.call_id, []).append(CallCancelledError(now))
            raise
        finally:
            if follower is not None:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
        room = self._rooms.get(api.call_id)
        if room is None:
            text = tool.text(answer)
        else:
            prefix = f"call-{api.call_id}"
            answer, text = fitted(
                tool, answer, room, self._keep(), lambda raw: save_artifact(self.session.artifact_dir, prefix, raw)
            )
        api.details(answer.to_json())
        for warning in warnings_of(answer):
            api.diagnostic(warning)
        return text

    def _keep(self) -> Keep:
        """The end the session's own windows keep (a cut for a client keeps the same end)."""
        truncation = self.session.settings.bound
        return truncation.limits.keep if isinstance(truncation, On) else Keep.TAIL


_OF_SESSION: weakref.WeakKeyDictionary[AgentSession, ToolCalls] = weakref.WeakKeyDictionary()


def _nobody(event: Record) -> None:
    return None


def clipped(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters (an ellipsis says it was cut)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def calls_of(session: AgentSession, call: str | None = None) -> CallList:
    """The session's tool calls from its committed state, in start order; with `call`, that call's settle whole
    (the content of its `tool_result` entry)."""
    results: dict[str, dict[str, Any]] = {}
    for entry in session.entries():
        content = entry.content
        if entry.kind == "tool_result" and isinstance(content, dict) and isinstance(content.get("call"), str):
            results[content["call"]] = content
    slots = session.view_state().slots
    rows = [_row(slot, results.get(slot.call)) for slot in slots.values()]
    settle = None
    if call is not None:
        if call not in slots:
            raise UnknownCallError(call)
        settle = results.get(call)
    return CallList(calls=rows, settle=settle)


def _row(slot: Slot, result: dict[str, Any] | None) -> CallRow:
    outcome = slot.outcome
    status = "running" if slot.status == "running" else "done"
    if outcome in ("cancelled", "interrupted"):
        status = outcome
    return CallRow(
        call=slot.call,
        tool=slot.tool,
        args=clipped(json.dumps(slot.args, ensure_ascii=False), ARGS_SHOWN),
        status=status,  # type: ignore[arg-type]
        outcome=outcome,  # type: ignore[arg-type]
        started_ms=slot.started_ms,
        settled_ms=slot.settled_ms,
        summary=_summary(result),
    )


def _summary(result: dict[str, Any] | None) -> str:
    """A settled call's result in one line: its text's first line, or its last warning when it failed."""
    if result is None:
        return ""
    warnings = result.get("warnings") or []
    if result.get("status") == "failed" and warnings:
        return clipped(str(warnings[-1]), SUMMARY_SHOWN)
    output = result.get("output")
    text = output.get("text", "") if isinstance(output, dict) else ""
    first = next((line for line in str(text).splitlines() if line.strip()), "")
    return clipped(first, SUMMARY_SHOWN)


class UnknownCallError(UsageError):
    """`session calls --call` names a call the session does not have."""

    code = "unknown_call"

    def __init__(self, call: str) -> None:
        super().__init__(f"no tool call {call!r} in this session")
        self.call = call
