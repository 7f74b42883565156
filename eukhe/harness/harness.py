"""The Harness runs tool calls and journals exactly two records per call (S2 "A tool call" 1-5).

It runs the core's call-journal model (`eukhe.core.job.journal_step`) for every call: each report of a running call
is an event the model folds, and the Harness commits exactly the records the model answers: the start (slot
`running`, with the execute checkpoint: what a crash recovery needs to find the durable output) and, at the end, the
settle (slot `done` and the `tool_result` entry in one commit). Progress goes to the board, never to the journal.
The output bytes themselves go to the call's `BoundedOutput`; the model counts them, and the settle's window holds
exactly that many (kept + dropped). A call ends by returning, failing, or being aborted; an abort settles from what
the call reported. After a crash, `settle_interrupted` settles each slot still `running` from what is durable: the
BoundedOutput artifact named by its checkpoint, if the output reached one.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from eukhe.core import job as model
from eukhe.core.bound import Off, Truncation
from eukhe.errors import EukheError, UsageError
from eukhe.harness.board import EventStream, ProgressBoard
from eukhe.harness.dyn import DYN, DynamicSource, DynamicTool, DynArgs
from eukhe.harness.tool import (
    ToolExecutionApi,
    ToolRegistration,
    ToolResult,
    ToolReturn,
    reporting_for,
    usage_totals,
)
from eukhe.output import BoundedOutput, BoundedResult, job_artifact_prefix
from eukhe.records.base import convert
from eukhe.records.daemon import Progress
from eukhe.records.journal import (
    CallOutcome,
    CallSettle,
    CallStart,
    Checkpoint,
    Commit,
    EntryRecord,
    JournalRecord,
    ToolResultContent,
)
from eukhe.records.output import OutputWindow
from eukhe.records.settings import setting_of, truncation_of
from eukhe.store.journal import JournalError
from eukhe.store.tree import Slot

JSON = Any
DYN_DESCRIPTION = "call a dynamic tool (a kernel's @rlm.remote function, `remote/<name>`) by name with its arguments"
INTERRUPTED_WARNING = "the call was interrupted by a crash; its live progress was lost"


class UnknownToolError(UsageError):
    """A call names a tool the harness does not have."""

    code = "unknown_tool"

    def __init__(self, name: str) -> None:
        super().__init__(f"no tool named {name!r}")
        self.name = name


class CallNotRunningError(EukheError):
    """An abort names a call the board does not keep (never started, or already settled)."""

    code = "call_not_running"

    def __init__(self, call_id: str) -> None:
        super().__init__(f"no running tool call {call_id!r}")
        self.call_id = call_id


class Committer(Protocol):
    """What the Harness needs from its session: one durable commit at a time, entries at the current leaf."""

    def commit(self, records: Sequence[JournalRecord], *, sync: bool = True) -> Commit:
        """Make `records` one durable commit (raise JournalError if it did not happen); `sync=False`: written at
        once, durable against a machine's crash with the next commit."""
        ...

    def entry_record(self, kind: str, content: JSON) -> EntryRecord:
        """A new entry record, child of the current leaf."""
        ...


class _Running:
    """One running call: the model's state, its bounded output, details, its task and its settle."""

    def __init__(self, call: str, tool: str, output: BoundedOutput, board: ProgressBoard) -> None:
        self.call = call
        self.tool = tool
        self.output = output
        self.state = model.CallState()
        self.details: JSON = None
        self.usage_reports: list[dict[str, int]] = []
        self.published: Progress | None = None
        self.board = board
        self.task: asyncio.Task[Any] | None = None
        self.aborted = False
        self.done = asyncio.Event()  # set once the call's `call` coroutine has finished (settled or not)
        self.settled: ToolResult | None = None
        self.error: Exception | None = None  # what the tool raised, when it failed

    def step(self, event: model.CallEvent) -> tuple[model.JournalRecord, ...]:
        """Fold one event; the records the model journals for it."""
        self.state, records = model.journal_step(self.state, event)
        return records

    @property
    def running(self) -> bool:
        return self.state.phase is model.CallPhase.RUNNING

    # -- CallReports: what the tool reports while it runs (nothing once it settled) --

    def output_bytes(self, data: bytes) -> None:
        if self.running:
            self.step(model.CallOutput(len(data)))
            self.output.write(data)

    def progress(self) -> Progress:
        return Progress(
            output=self.output.snapshot().to_record(),
            details=self.details,
            diagnostics=list(self.state.warnings),
            usage=[dict(report) for report in self.usage_reports],
        )


class _Reports:
    """A running call's reports, as the ToolExecutionApi hands them over."""

    def __init__(self, running: _Running) -> None:
        self._running = running

    def output(self, data: bytes) -> None:
        self._running.output_bytes(data)

    def details(self, value: JSON) -> None:
        if self._running.running:
            self._running.details = value

    def diagnostic(self, text: str) -> None:
        if self._running.running:
            self._running.step(model.CallWarning(text))

    def usage(self, report: Mapping[str, int]) -> None:
        if self._running.running:
            self._running.step(model.CallUsage(tuple(report.items())))
            self._running.usage_reports.append(dict(report))

    def publish(self) -> None:
        if self._running.running:
            self._running.step(model.CallProgress(""))
            self._running.board.publish(self._running.call)


JobEnd = Callable[[str], tuple[OutputWindow, JSON] | None]
"""A job's output and answer, once it ended, by job id (None: no such job has ended)."""


def wall_ms() -> int:
    """Now on the wall clock, in ms since the epoch (what a call's start and settle record)."""
    return time.time_ns() // 1_000_000


class Harness:
    """The tools of a session and the calls running on them."""

    def __init__(
        self,
        committer: Committer,
        truncation: Callable[[], Truncation],
        artifact_dir: Path,
        job_ids: Callable[[], str] | None = None,
        before_settle: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._committer = committer
        self._before_settle = before_settle
        """Writes what the session queued during a call (its job's end) without an fdatasync of its own: the settle's
        commit, in the same journal, makes it durable with its own."""
        self._truncation = truncation
        self._artifact_dir = artifact_dir
        self._job_ids = job_ids
        self._tools: dict[str, ToolRegistration] = {}
        self._running: dict[str, _Running] = {}
        self._dynamic: list[DynamicSource] = []
        self.board = ProgressBoard()
        self.register(ToolRegistration(DYN, DynArgs, self._dyn, description=DYN_DESCRIPTION))

    def retarget(self, artifact_dir: Path) -> None:
        """Later calls spill their artifacts here (the session continues in a fork)."""
        self._artifact_dir = artifact_dir

    def register(self, registration: ToolRegistration) -> None:
        """Add (or replace) a tool."""
        self._tools[registration.name] = registration

    def tools(self) -> list[ToolRegistration]:
        """The registered tools: the roster (with the `dyn` entry; never the dynamic tools it reaches)."""
        return list(self._tools.values())

    def add_dynamic(self, source: DynamicSource) -> None:
        """Reach `source`'s tools through the `dyn` entry (a session's kernel functions, `remote/<name>`)."""
        self._dynamic.append(source)

    def dynamic_tool(self, name: str) -> DynamicTool | None:
        """The dynamic tool of that name, from the first source that has it."""
        for source in self._dynamic:
            tool = source.dynamic_tool(name)
            if tool is not None:
                return tool
        return None

    def dynamic_tools(self) -> list[DynamicTool]:
        """The dynamic tools there are now (what `dyn` reaches)."""
        return [tool for source in self._dynamic for tool in source.dynamic_tools()]

    async def _dyn(self, args: DynArgs, api: ToolExecutionApi) -> ToolReturn:
        """The `dyn` entry: run the named dynamic tool with its arguments (an unknown one fails the call)."""
        tool = self.dynamic_tool(args.tool)
        if tool is None:
            raise UnknownToolError(args.tool)
        return await tool.execute(dict(args.args), api)

    def watch_events(self) -> EventStream:
        """Live observer: a snapshot of each running call's last published progress, then one event per change."""
        return self.board.watch()

    def running_calls(self) -> list[str]:
        """The calls on the board (started, settle not yet committed)."""
        return self.board.running()

    async def call(
        self, tool: str, args: Mapping[str, JSON], *, call_id: str | None = None, raise_failure: bool = False
    ) -> ToolResult:
        """Run one call to its settle. Cancelling the awaiting task aborts the call: it settles, then re-raises. A
        tool that fails settles as failed; with `raise_failure` its error is raised after the settle."""
        registration = self._tools.get(tool)
        if registration is None:
            raise UnknownToolError(tool)
        decoded = convert(dict(args), registration.args, code="bad_tool_arguments", what=f"tool {tool}")
        call = call_id or f"call-{secrets.token_hex(6)}"
        if call in self._running:
            raise UsageError(f"tool call id {call!r} is in use")
        truncation = reporting_for(registration, self._truncation())
        prefix = f"output-{call}"
        running = _Running(
            call, tool, BoundedOutput(truncation, self._artifact_dir, artifact_prefix=prefix), self.board
        )
        (start,) = running.step(model.CallBegun())
        assert isinstance(start, model.StartRecord)
        job = self._job_ids() if registration.runs_job and self._job_ids is not None else None
        checkpoint = Checkpoint(
            artifact_dir=str(self._artifact_dir),
            artifact_prefix=prefix if job is None else job_artifact_prefix(job),
            truncation=setting_of(truncation),
            job=job,
        )
        # The start is written before the call runs (a crash of this process keeps it) and made durable by the next
        # commit's fdatasync, at the latest its settle's: one fdatasync per call.
        self._committer.commit(
            [CallStart(call=call, tool=tool, args=dict(args), checkpoint=checkpoint, at_ms=wall_ms())], sync=False
        )
        self.board.add(running)
        api = ToolExecutionApi(call, _Reports(running), truncation, job_id=job)
        task = asyncio.ensure_future(registration.execute(decoded, api))
        running.task = task
        self._running[call] = running
        ending: model.CallEvent = model.CallReturn()
        outer_cancel: asyncio.CancelledError | None = None
        try:
            try:
                returned = await asyncio.shield(task)
                if returned:
                    api.output(returned)
                if running.aborted:  # the tool swallowed the abort and returned: it still settles as cancelled
                    ending = model.CallCancel()
            except asyncio.CancelledError as cancel:
                if not task.done():  # our caller cancelled us: abort the call itself
                    outer_cancel = cancel
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                ending = model.CallCancel()
            except Exception as error:  # the tool failed: it settles as failed, with the error as its last warning
                running.error = error
                ending = model.CallFail(f"{type(error).__name__}: {error}")
            if self._before_settle is not None:
                try:  # how the call ends is decided: a cancel now is re-raised after the settle
                    await asyncio.shield(self._before_settle())
                except asyncio.CancelledError as cancel:
                    outer_cancel = outer_cancel or cancel
            result = self._settle(running, ending)
        finally:
            if running.settled is not None:
                self._running.pop(call, None)
            running.done.set()
        if outer_cancel is not None:
            raise outer_cancel
        if raise_failure and running.error is not None:
            raise running.error
        return result

    def abort(self, call_id: str) -> None:
        """Abort a running call: its `call` settles as cancelled. A call whose settle failed to commit settles now,
        as cancelled, from the same reports (the model's state before that settle)."""
        running = self._running.get(call_id)
        if running is None:
            raise CallNotRunningError(call_id)
        running.aborted = True
        if running.task is not None and not running.task.done():
            running.task.cancel()
        elif running.settled is None:
            self._settle(running, model.CallCancel())
            self._running.pop(call_id, None)

    async def abort_all(self) -> None:
        """Abort every running call and wait until each has settled (or failed to: it stays on the board)."""
        for call_id in list(self._running):
            running = self._running.get(call_id)
            if running is None:
                continue
            try:
                self.abort(call_id)
            except JournalError:
                continue  # its settle cannot commit now: the next open settles it from what is durable
            await running.done.wait()

    def _settle(self, running: _Running, ending: model.CallEvent) -> ToolResult:
        """Commit what the model's settle says (slot `done` and the result entry, one commit); the board drops the
        call after. If the commit fails, the call keeps its state before the settle, so a later abort settles it
        from the same reports."""
        before = running.state
        (settle,) = running.step(ending)
        assert isinstance(settle, model.SettleRecord)
        bounded = running.output.close()
        assert bounded.bytes_kept + bounded.bytes_dropped == settle.written  # every byte the model counted
        outcome = _outcome(settle.outcome)
        content = _content(
            running.call, running.tool, outcome, bounded.to_record(), details=running.details, settle=settle
        )
        entry = self._committer.entry_record("tool_result", content)
        try:
            self._committer.commit([CallSettle(call=running.call, outcome=outcome, at_ms=wall_ms()), entry])
        except JournalError:
            running.state = before
            raise
        result = ToolResult(
            call_id=running.call,
            tool=running.tool,
            status=outcome,
            output=content.output,
            details=running.details,
            warnings=settle.warnings,
            usage=tuple(dict(report) for report in settle.usage),
            entry_id=entry.id,
        )
        running.settled = result
        self.board.remove(running.call, outcome)
        return result

    def settle_interrupted(self, slots: Mapping[str, Slot], job_end: JobEnd | None = None) -> list[ToolResult]:
        """After a crash: settle every slot still `running` from what is durable: the end of the job it ran (its
        output and answer, by `job_end`), else its artifact, if any."""
        results: list[ToolResult] = []
        for slot in list(slots.values()):
            if slot.status != "running" or slot.call in self._running:
                continue
            ended = None if slot.checkpoint.job is None or job_end is None else job_end(slot.checkpoint.job)
            details: JSON = None
            if ended is not None:
                window, details = ended
            else:
                window = durable_output(slot.checkpoint).to_record()
            settle = model.SettleRecord(
                "cancelled", window.bytes_kept + window.bytes_dropped, (INTERRUPTED_WARNING,), ()
            )
            content = _content(slot.call, slot.tool, "interrupted", window, details=details, settle=settle)
            entry = self._committer.entry_record("tool_result", content)
            self._committer.commit([CallSettle(call=slot.call, outcome="interrupted", at_ms=wall_ms()), entry])
            results.append(
                ToolResult(
                    call_id=slot.call,
                    tool=slot.tool,
                    status="interrupted",
                    output=content.output,
                    details=details,
                    warnings=settle.warnings,
                    usage=(),
                    entry_id=entry.id,
                )
            )
        return results


def _outcome(name: str) -> CallOutcome:
    if name == "returned":
        return "returned"
    if name == "failed":
        return "failed"
    return "cancelled"


def _content(
    call: str, tool: str, outcome: CallOutcome, window: OutputWindow, *, details: JSON, settle: model.SettleRecord
) -> ToolResultContent:
    """The content of a `tool_result` entry: `usage` holds the totals, `usage_reports` every report in order."""
    reports = [dict(report) for report in settle.usage]
    return ToolResultContent(
        call=call,
        tool=tool,
        status=outcome,
        output=window,
        details=details,
        warnings=list(settle.warnings),
        usage=usage_totals(reports),
        usage_reports=reports,
    )


def durable_output(checkpoint: Checkpoint, what: str = "interrupted call") -> BoundedResult:
    """The output a crashed call (or job: `what`) left on disk: its artifact's bytes, bounded again under its
    Truncation; empty when it had none."""
    truncation = truncation_of(checkpoint.truncation)
    root = Path(checkpoint.artifact_dir)
    found = (
        sorted(path for path in root.iterdir() if path.name.startswith(f"{checkpoint.artifact_prefix}-"))
        if (root.is_dir())
        else []
    )
    bounder = BoundedOutput(truncation if found else Off(), None)
    if not found:
        return bounder.close()
    with open(found[0], "rb") as handle:
        while chunk := handle.read(1 << 16):
            bounder.write(chunk)
    window = bounder.close()
    return BoundedResult(
        window.text,
        window.bytes_kept,
        window.bytes_dropped,
        window.lines_kept,
        window.lines_dropped,
        f"[{what}: output bounded from its artifact {found[0]}]" if window.bytes_dropped else window.notice,
        found[0],
    )
