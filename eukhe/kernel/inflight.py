"""What is in flight on one kernel (S3 "The protocol" 4-6): its cells, its interrupts and its remote calls.

A `CellRun` is one cell: output goes to its `BoundedOutput` (and listeners), `done` ends it exactly once. `InFlight`
keeps a kernel's cells (oldest first: untagged output goes to the running one), interrupts and calls, acts on the
frames that answer them, and ends them all when the kernel's life ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from eukhe.core.gate import Admission, Refusal
from eukhe.core.kernel_life import Event as LifeEvent
from eukhe.core.kernel_life import Reason
from eukhe.errors import EukheError, error_code, error_details
from eukhe.kernel.displays import CellDisplays, display_text
from eukhe.kernel.errors import KernelDiedError, KernelError, KernelStartError, RemoteCallError
from eukhe.output import BoundedOutput, BoundedResult
from eukhe.records.base import Record, encode, strict_json
from eukhe.records.displays import Display
from eukhe.records.jobs import CellError, CellOutcomeName
from eukhe.records.kernel import (
    CallRequest,
    DiagnosticFrame,
    DisplayFrame,
    DoneFrame,
    ErrorFrame,
    HostReplyError,
    HostReplyOk,
    HostReplyRefused,
    ProcessFrame,
    ReadyFrame,
    ResultFrame,
    StderrFrame,
    StdoutFrame,
)

HostHandler = Callable[[Admission], Awaitable[Any]]
"""Serves one accepted host request; its return value (JSON) or its exception is the one reply."""


class KernelKilledError(KernelError):
    """The kernel was killed on purpose (a kill, a cancel past its grace, or the manager's close)."""

    code = "kernel_killed"


LIFE_EVENT: Mapping[type, LifeEvent] = {
    StdoutFrame: LifeEvent.STDOUT,
    StderrFrame: LifeEvent.STDERR,
    DisplayFrame: LifeEvent.DISPLAY,
    ResultFrame: LifeEvent.RESULT,
    ErrorFrame: LifeEvent.ERROR,
    DoneFrame: LifeEvent.DONE,
    ReadyFrame: LifeEvent.READY,
    ProcessFrame: LifeEvent.PROCESS,
    DiagnosticFrame: LifeEvent.DIAGNOSTIC,
}
"""The life event of each kernel event record."""


def end_error(reason: Reason, decided: KernelError | None, returncode: int | None) -> KernelError:
    """The error a kernel's end gives what was in flight: the fault's or the host's own (`decided`), else its
    reason's."""
    if reason in (Reason.FAULT, Reason.HOST_FAILED) and decided is not None:
        return decided
    if reason is Reason.KILLED:
        return KernelKilledError("the Python kernel was killed; the next cell starts a fresh one")
    if reason is Reason.STOPPED:
        return KernelKilledError(
            "the Python kernel was stopped; the next cell starts a fresh one with its namespace snapshot"
        )
    if reason is Reason.START_FAILED:
        return KernelStartError("the Python kernel did not start in time")
    return KernelDiedError(returncode)


@dataclass(frozen=True, slots=True)
class CellOutcome:
    """How a cell ended: status, its bounded output, the repr of its trailing expression, its error, its images
    (saved as artifacts; the notice says which are not shown, `displays_dropped` how many were not saved)."""

    id: str
    status: CellOutcomeName
    output: BoundedResult
    result: str | None
    error: CellError | None
    displays: tuple[Display, ...] = ()
    displays_notice: str | None = None
    displays_dropped: int = 0


class CellRun:
    """A cell in flight: output goes to its `BoundedOutput` (and to listeners), `done` ends it exactly once."""

    def __init__(
        self,
        cell_id: str,
        make_output: Callable[[], BoundedOutput],
        empty: BoundedResult,
        artifact_dir: Path | None = None,
    ) -> None:
        self.id = cell_id
        self._make_output = make_output
        self._output: BoundedOutput | None = None
        self._empty = empty
        self.result: str | None = None
        self.error: CellError | None = None
        self.displays = CellDisplays(cell_id, artifact_dir)
        self._listeners: list[Callable[[bytes], None]] = []
        self._end_listeners: list[Callable[[CellOutcome], None]] = []
        self._done: asyncio.Future[CellOutcome] = asyncio.get_running_loop().create_future()
        self._waiters: list[asyncio.Future[CellOutcome]] = []
        self.notices: tuple[str, ...] = ()
        """What the host said as the cell was sent (the workspace venv its kernel imports from now): its answer's."""

    @property
    def output(self) -> BoundedOutput:
        """The cell's bounded output (made at the first byte: most cells write nothing)."""
        if self._output is None:
            self._output = self._make_output()
        return self._output

    def write(self, data: bytes) -> None:
        """Output of the cell, in arrival order."""
        if self._done.done():
            return
        self.output.write(data)
        for listener in self._listeners:
            listener(data)

    def add_listener(self, on_output: Callable[[bytes], None], on_end: Callable[[CellOutcome], None]) -> None:
        """Get every later output byte and the end (a cell that became a job)."""
        self._listeners.append(on_output)
        self._end_listeners.append(on_end)
        if self._done.done():
            on_end(self._done.result())

    def finish(self, status: str, error: CellError | None = None) -> None:
        """End the cell once; later calls are ignored."""
        if self._done.done():
            return
        outcome = CellOutcome(
            self.id,
            _outcome_name(status),
            self._empty if self._output is None else self._output.close(),
            self.result,
            error or self.error,
            tuple(self.displays.records),
            self.displays.notice(),
            self.displays.tally.dropped,
        )
        self._done.set_result(outcome)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(outcome)
        for listener in self._end_listeners:
            listener(outcome)

    @property
    def done(self) -> bool:
        """Whether the cell ended."""
        return self._done.done()

    def outcome(self) -> CellOutcome | None:
        """The end, if the cell ended."""
        return self._done.result() if self._done.done() else None

    async def wait(self) -> CellOutcome:
        """Wait for the end (cancelling the wait does not cancel the cell)."""
        if self._done.done():
            return self._done.result()
        waiter: asyncio.Future[CellOutcome] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)


class InFlight:
    """A kernel's cells (oldest first), interrupts and remote calls awaiting their `done`."""

    def __init__(self, background: BoundedOutput) -> None:
        self.background = background  # output of no cell in flight
        self.cells: dict[str, CellRun] = {}
        self.controls: dict[str, asyncio.Future[DoneFrame]] = {}
        self.calls: dict[str, asyncio.Future[Any]] = {}
        self.host_tasks: set[asyncio.Task[None]] = set()  # the host requests being served

    def __bool__(self) -> bool:
        return bool(self.cells or self.calls or self.controls) or any(not t.done() for t in self.host_tasks)

    def call(self, call_id: str, name: str, module: str, function: str, args: Mapping[str, Any]) -> bytes:
        """A remote call's request line, its future kept; arguments that are not JSON: `failed`."""
        try:
            strict_json(dict(args), "the arguments")
            request = CallRequest(id=call_id, name=name, module=module, function=function, args=dict(args))
            line = encode(request) + b"\n"
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            raise RemoteCallError("failed", f"the arguments are not JSON: {exc}", reason="bad_arguments") from None
        self.calls[call_id] = asyncio.get_running_loop().create_future()
        return line

    def serve(self, admission: Admission, handler: HostHandler, reply: Callable[[Record], None]) -> None:
        """Run an accepted host request's handler as its own task; its result or its error is the one reply."""
        task = asyncio.create_task(self._serve(admission, handler, reply))
        self.host_tasks.add(task)
        task.add_done_callback(self.host_tasks.discard)

    async def _serve(self, admission: Admission, handler: HostHandler, reply: Callable[[Record], None]) -> None:
        answer: Record
        try:
            result = await handler(admission)
            strict_json(result, "the handler's result")  # NaN or infinity: an error reply, not a silent null
            answer = HostReplyOk(id=admission.id, status="ok", result=result)
            encode(answer)  # a result that is not JSON at all is an error reply too
        except asyncio.CancelledError:
            raise
        except EukheError as exc:  # first: a refusal may be a ValueError too (a UsageError), and is not unencodable
            error = HostReplyError(code=error_code(exc), message=str(exc), details=error_details(exc))
            answer = HostReplyRefused(id=admission.id, status="error", error=error)
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            error = HostReplyError(code="unencodable", message=f"the handler's result is not JSON: {exc}")
            answer = HostReplyRefused(id=admission.id, status="error", error=error)
        except Exception as exc:
            error = HostReplyError(code="handler_error", message=f"{type(exc).__name__}: {exc}")
            answer = HostReplyRefused(id=admission.id, status="error", error=error)
        reply(answer)

    async def stop_serving(self) -> None:
        """Cancel the host requests still being served, and wait for them."""
        for task in self.host_tasks:
            task.cancel()
        await asyncio.gather(*self.host_tasks, return_exceptions=True)

    def _cell_for(self, cell_id: str | None) -> CellRun | None:
        if cell_id is None:  # untagged raw output: the running cell is the oldest in flight
            return next(iter(self.cells.values()), None)
        return self.cells.get(cell_id)

    def act(self, frame: StdoutFrame | StderrFrame | DisplayFrame | ResultFrame | ErrorFrame | DoneFrame) -> None:
        """A frame that answers what is in flight: a cell's output, result, error or end; an interrupt's or a
        call's `done`."""
        if isinstance(frame, StdoutFrame | StderrFrame):
            run = self._cell_for(frame.id)
            (run.write if run is not None else self.background.write)(_text_bytes(frame.text))
            return
        run = self._cell_for(frame.id) if frame.id is not None else None
        if isinstance(frame, DisplayFrame):
            plain = frame.data.get("text/plain")
            shown = display_text(frame.data)
            if shown is None:
                shown = plain if isinstance(plain, str) else "<display>"
            text = _text_bytes(shown + ("" if shown.endswith("\n") else "\n"))
            if run is not None and not run.done:
                run.displays.add(frame.data)
            (run.write if run is not None else self.background.write)(text)
        elif isinstance(frame, ResultFrame) and run is not None:
            rich = display_text(frame.data) if frame.data is not None else None
            run.result = frame.repr if rich is None else rich
            if frame.data is not None:
                run.displays.add(frame.data)
        elif isinstance(frame, ErrorFrame) and run is not None:
            run.error = CellError(ename=frame.ename, evalue=frame.evalue, traceback=list(frame.traceback))
        elif isinstance(frame, DoneFrame) and frame.id is not None:
            if frame.id in self.cells:
                self.cells.pop(frame.id).finish(frame.status)
            elif frame.id in self.controls:
                self.controls.pop(frame.id).set_result(frame)
            elif frame.id in self.calls:
                _settle_call(self.calls.pop(frame.id), frame)

    def fail_calls(self, why: str = "") -> None:
        """The kernel stopped before replying to its remote calls: each answers `unreachable` now."""
        for future in self.calls.values():
            if not future.done():
                future.set_exception(
                    RemoteCallError("unreachable", f"the Python kernel stopped before the call's reply{why}")
                )
        self.calls.clear()

    def end(self, status: str, error: BaseException) -> None:
        """The kernel's life ended: every cell ends with `status` and its output so far, every interrupt unfound."""
        for run in list(self.cells.values()):
            run.finish(status, _error_of(error))
        self.cells.clear()
        for future in self.controls.values():
            if not future.done():
                future.set_result(DoneFrame(id=None, status="error", reason=str(error)))
        self.controls.clear()
        self.fail_calls(f": {error}")


def refusal_reply(refusal: Refusal) -> HostReplyRefused:
    """The one reply to a host request the gate refused."""
    error = HostReplyError(code=refusal.reason.value, message=refusal.message)
    return HostReplyRefused(
        id=refusal.id, status="duplicate" if refusal.status == "duplicate" else "error", error=error
    )


def _error_of(error: BaseException) -> CellError:
    return CellError(ename=type(error).__name__, evalue=str(error), traceback=[])


_OUTCOMES: dict[str, CellOutcomeName] = {
    "ok": "ok",
    "error": "error",
    "interrupted": "interrupted",
    "died": "died",
    "fault": "fault",
    "killed": "killed",
}


def _outcome_name(status: str) -> CellOutcomeName:
    """A cell's outcome; a status the kernel should not send counts as an error."""
    return _OUTCOMES.get(status, "error")


def _settle_call(future: asyncio.Future[Any], frame: DoneFrame) -> None:
    """A remote call's `done`: its result, or the kernel's reason as a RemoteCallError (`unknown`, else `failed`)."""
    if future.done():
        return
    if frame.status == "ok":
        future.set_result(frame.result)
    elif frame.reason == "unknown":
        future.set_exception(RemoteCallError("unknown", frame.message or "no such remote function in the kernel"))
    else:
        message = frame.message or f"the remote call failed ({frame.reason})"
        future.set_exception(RemoteCallError("failed", message, reason=frame.reason))


def _text_bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")
