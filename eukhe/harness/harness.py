"""The Harness runs tool calls and journals exactly two records per call (S2 "A tool call" 1-5).

A call commits its start (slot `running`, with the execute checkpoint: what a crash recovery needs to find the
durable output) and, at its end, its settle: slot `done` and the `tool_result` entry in one commit. In between it
commits nothing: every progress report goes to the board. A call ends by returning, failing, or being aborted; an
abort settles from the board with whatever the call reported. After a crash, `settle_interrupted` settles each slot
still `running` from what is durable: the BoundedOutput artifact named by its checkpoint, if the output reached one.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from eukhe.core.limits import Truncation
from eukhe.errors import EukheError, UsageError
from eukhe.harness.board import CallProgress, EventStream, ProgressBoard
from eukhe.harness.schema import check_args
from eukhe.harness.tool import ToolExecutionApi, ToolRegistration, ToolResult, reporting_for, result_content
from eukhe.output import BoundedOutput, BoundedResult
from eukhe.session.journal import Commit, JournalError, Record
from eukhe.session.settings import truncation_from_json, truncation_to_json
from eukhe.session.tree import Slot

JSON = Any


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

    def commit(self, records: Sequence[Record]) -> Commit:
        """Make `records` one durable commit (raise JournalError if it did not happen)."""
        ...

    def entry_record(self, kind: str, content: JSON) -> dict[str, JSON]:
        """A new entry record, child of the current leaf."""
        ...


def output_json(result: BoundedResult) -> dict[str, JSON]:
    """A bounded result as the result entry holds it; the exact bytes ride along when they are not UTF-8."""
    value = result.as_json()
    try:
        result.text.decode("utf-8")
    except UnicodeDecodeError:
        value["textBase64"] = base64.b64encode(result.text).decode("ascii")
    return value


class _Running:
    """The shell's handle on one running call."""

    def __init__(self, progress: CallProgress, task: asyncio.Task[Any]) -> None:
        self.progress = progress
        self.task = task
        self.aborted = False
        self.done = asyncio.Event()  # set once the call's `call` coroutine has finished (settled or not)
        self.settled: ToolResult | None = None
        self.pending_settle: tuple[str, str, str] | None = None  # (status, tool, failure) of a settle not committed


class Harness:
    """The tools of a session and the calls running on them."""

    def __init__(self, committer: Committer, truncation: Callable[[], Truncation], artifact_dir: Path) -> None:
        self._committer = committer
        self._truncation = truncation
        self._artifact_dir = artifact_dir
        self._tools: dict[str, ToolRegistration] = {}
        self._running: dict[str, _Running] = {}
        self.board = ProgressBoard()

    def retarget(self, artifact_dir: Path) -> None:
        """Later calls spill their artifacts here (the session continues in a fork)."""
        self._artifact_dir = artifact_dir

    def register(self, registration: ToolRegistration) -> None:
        """Add (or replace) a tool."""
        self._tools[registration.name] = registration

    def tools(self) -> list[ToolRegistration]:
        """The registered tools."""
        return list(self._tools.values())

    def watch_events(self) -> EventStream:
        """Live observer: a snapshot of each running call's last published progress, then one event per change."""
        return self.board.watch()

    def running_calls(self) -> list[str]:
        """The calls on the board (started, settle not yet committed)."""
        return self.board.running()

    async def call(self, tool: str, args: Mapping[str, JSON], *, call_id: str | None = None) -> ToolResult:
        """Run one call to its settle. Cancelling the awaiting task aborts the call: it settles, then re-raises."""
        registration = self._tools.get(tool)
        if registration is None:
            raise UnknownToolError(tool)
        check_args(tool, registration.parameters, dict(args))
        call = call_id or f"call-{secrets.token_hex(6)}"
        if call in self._running:
            raise UsageError(f"tool call id {call!r} is in use")
        truncation = reporting_for(registration, self._truncation())
        prefix = f"output-{call}"
        checkpoint = {
            "artifactDir": str(self._artifact_dir),
            "artifactPrefix": prefix,
            "truncation": truncation_to_json(truncation),
        }
        output = BoundedOutput(truncation, self._artifact_dir, artifact_prefix=prefix)
        progress = CallProgress(call, tool, output)
        self._committer.commit(
            [
                {
                    "t": "slot",
                    "call": call,
                    "status": "running",
                    "tool": tool,
                    "args": dict(args),
                    "checkpoint": checkpoint,
                }
            ]
        )
        self.board.add(progress)
        api = ToolExecutionApi(self.board, progress, truncation)
        task = asyncio.ensure_future(registration.execute(args, api))
        running = _Running(progress, task)
        self._running[call] = running
        status, failure = "returned", ""
        outer_cancel: asyncio.CancelledError | None = None
        try:
            try:
                returned = await asyncio.shield(task)
                if returned:
                    api.output(returned)
                if running.aborted:  # the tool swallowed the abort and returned: it still settles as cancelled
                    status = "cancelled"
            except asyncio.CancelledError as cancel:
                if not task.done():  # our caller cancelled us: abort the call itself
                    outer_cancel = cancel
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                status = "cancelled"
            except Exception as error:  # the tool failed: it settles as failed, with the error as its last warning
                status, failure = "failed", f"{type(error).__name__}: {error}"
            result = self._settle(running, status, failure)
        finally:
            if running.settled is not None:
                self._running.pop(call, None)
            running.done.set()
        if outer_cancel is not None:
            raise outer_cancel
        return result

    def abort(self, call_id: str) -> None:
        """Abort a running call: its `call` settles as cancelled from the board. A call whose settle failed to
        commit settles now, as cancelled, from the same progress."""
        running = self._running.get(call_id)
        if running is None:
            raise CallNotRunningError(call_id)
        running.aborted = True
        if not running.task.done():
            running.task.cancel()
        elif running.settled is None and running.pending_settle is not None:
            self._settle(running, "cancelled", running.pending_settle[2])
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

    def _settle(self, running: _Running, status: str, failure: str) -> ToolResult:
        """Commit slot `done` and the result entry in one commit, from the board; the board drops the call after."""
        progress = running.progress
        if failure:
            progress.diagnostics.append(failure)
            failure = ""
        bounded = progress.output.close()
        progress.ended = True  # what the call reports from now on is not part of its settle
        warnings = tuple(progress.diagnostics)
        usage = tuple(dict(report) for report in progress.usage)
        content = result_content(
            progress.call, progress.tool, status, bounded, details=progress.details, warnings=warnings, usage=usage
        )
        content["output"] = output_json(bounded)
        entry = self._committer.entry_record("tool_result", content)
        slot = {"t": "slot", "call": progress.call, "status": "done", "outcome": status}
        try:
            self._committer.commit([slot, entry])
        except JournalError:
            running.pending_settle = (status, progress.tool, failure)
            raise
        result = ToolResult(
            progress.call, progress.tool, status, bounded, progress.details, warnings, usage, entry["id"]
        )
        running.settled = result
        self.board.remove(progress.call, status)
        return result

    def settle_interrupted(self, slots: Mapping[str, Slot]) -> list[ToolResult]:
        """After a crash: settle every slot still `running` from what is durable (its artifact, if any)."""
        results: list[ToolResult] = []
        for slot in list(slots.values()):
            if slot.status != "running" or slot.call in self._running:
                continue
            checkpoint = slot.checkpoint if isinstance(slot.checkpoint, Mapping) else {}
            bounded = durable_output(checkpoint)
            warnings = ("the call was interrupted by a crash; its live progress was lost",)
            content = result_content(
                slot.call, slot.tool, "interrupted", bounded, details=None, warnings=warnings, usage=()
            )
            content["output"] = output_json(bounded)
            entry = self._committer.entry_record("tool_result", content)
            done = {"t": "slot", "call": slot.call, "status": "done", "outcome": "interrupted"}
            self._committer.commit([done, entry])
            results.append(ToolResult(slot.call, slot.tool, "interrupted", bounded, None, warnings, (), entry["id"]))
        return results


def durable_output(checkpoint: Mapping[str, JSON]) -> BoundedResult:
    """The output a crashed call left on disk: its artifact's bytes, bounded again under the call's Truncation."""
    try:
        truncation = truncation_from_json(checkpoint.get("truncation"))
    except UsageError:
        truncation = truncation_from_json({"off": True})
    directory = checkpoint.get("artifactDir")
    prefix = checkpoint.get("artifactPrefix")
    found: list[Path] = []
    if isinstance(directory, str) and isinstance(prefix, str):
        root = Path(directory)
        if root.is_dir():
            found = sorted(path for path in root.iterdir() if path.name.startswith(f"{prefix}-"))
    bounder = BoundedOutput(truncation, None)
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
        f"[interrupted call: output bounded from its artifact {found[0]}]" if window.bytes_dropped else window.notice,
        found[0],
    )
