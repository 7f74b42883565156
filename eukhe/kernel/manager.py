"""The host side of the kernel (S3 "The protocol" 1-7, "Where the sandbox runs" 1, 7-8): `KernelManager`.

Theory of operation: the manager is a thin shell over the kernel's life table (`eukhe.core.kernel_life`). It starts
the kernel its launch names (`eukhe.kernel.process`: Local, a child in its own process group; Wrapped, the wrapper
with the stub sent first on its stdin); the kernel's stdout goes, as it comes, through the one line splitter and the
pure gate (`FrameReader`), then each event frame is decoded strictly as its record. Every frame and every fact of
the process (its stdout closed, its exit, a kill, the start's budget passed) is an event of the table, which answers
the kernel's next phase and the effects the manager performs (act on the frame, fail the calls, end what is in
flight, settle the snapshot stop, terminate the process). Accepted host requests run as their own tasks and reply
when they end. Events feed the cells in flight: output into each cell's `BoundedOutput`, then `done` ends the cell.
Every wait runs on the manager's `Clock`, in milliseconds.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from eukhe.clock import Clock, MonotonicClock, wait_within
from eukhe.core import kernel_life as life_table
from eukhe.core.bound import DEFAULT_TRUNCATION, Truncation
from eukhe.core.cell_packages import kernel_lib
from eukhe.core.gate import DEFAULT_LIMITS, Admission, Dropped, Event, FaultReason, GateLimits, ProtocolFault, Refusal
from eukhe.core.kernel_life import CELL_STATUS, Effect, Life, Reason
from eukhe.core.kernel_life import Event as LifeEvent
from eukhe.errors import InputError
from eukhe.kernel import inflight
from eukhe.kernel.errors import KernelClosedError, KernelError, KernelProtocolError, KernelStartError, RemoteCallError
from eukhe.kernel.inflight import CellOutcome, CellRun, HostHandler, KernelKilledError
from eukhe.kernel.launch import KernelLaunch, kernel_launch
from eukhe.kernel.process import KernelProcess
from eukhe.kernel.splitter import FrameReader
from eukhe.output import BoundedOutput
from eukhe.records import kernel as wire
from eukhe.records.base import Record, convert, encode
from eukhe_kernel.protocol import PROTOCOL_VERSION

__all__ = ["Admission", "CellOutcome", "CellRun", "HostHandler", "KernelKilledError", "KernelManager"]

log = logging.getLogger("eukhe.kernel")

DIAGNOSTICS_KEPT = 256
"""The last diagnostics and faults a manager keeps (a session's kernel may live long and say much)."""
KILL_GRACE_MS = 1000
"""After closing stdin, how long the stub has to kill its `bash()` groups and exit before its group is killed."""
SNAPSHOT_GRACE_MS = 60_000
"""How long a kernel stopped with a snapshot (idle culling) may take to pickle its namespace before it is killed."""


@dataclass(eq=False)
class _Kernel:
    """One kernel process, its life and what is in flight on it."""

    process: KernelProcess
    reader: FrameReader
    ready: asyncio.Future[wire.ReadyFrame]
    work: inflight.InFlight
    life: Life = life_table.START
    watch: asyncio.Task[None] | None = None  # hears its stdout close
    ending: asyncio.Task[None] | None = None  # its termination, once begun
    stop_id: str | None = None  # the snapshot stop's shutdown request
    snapshot_settled: asyncio.Future[bool] | None = None
    child_groups: set[int] = field(default_factory=set)  # the stub's `bash()` process groups, reaped at its end
    error: KernelError | None = None  # the fault or the host's failure that decided its end
    number: int = 0  # which of the manager's kernels (from 1)


class KernelManager:
    """Runs cells on a Python kernel it starts, repairs and replaces; one per session (an asyncio object)."""

    def __init__(
        self,
        *,
        truncation: Truncation = DEFAULT_TRUNCATION,
        artifact_dir: Path | None = None,
        handlers: Mapping[str, HostHandler] | None = None,
        limits: GateLimits = DEFAULT_LIMITS,
        launch: Callable[[], KernelLaunch | Awaitable[KernelLaunch]] = kernel_launch,
        cwd: Path | None = None,
        start_timeout_ms: int = 30_000,
        clock: Clock | None = None,
    ) -> None:
        self.truncation = truncation
        self.artifact_dir = artifact_dir
        self.handlers: dict[str, HostHandler] = dict(handlers or {})
        self.limits = limits
        self.clock: Clock = clock or MonotonicClock()
        self._launch = launch
        self._cwd = cwd
        self._start_timeout_ms = start_timeout_ms
        self._kernel: _Kernel | None = None
        self._start_lock = asyncio.Lock()
        self._cells_waiting = 0
        """Cells sent while their kernel starts (not in its work yet)."""
        self._ids = itertools.count(1)
        self._closed = False
        self._ending: set[asyncio.Task[None]] = set()
        self.diagnostics: list[str] = []
        """The last DIAGNOSTICS_KEPT things the host said loudly: repairs, refusals of used ids, dropped frames,
        kernel notices (each is also logged)."""
        self.faults: list[ProtocolFault] = []
        self.kernels_started = 0
        self.on_child_group: Callable[[int, bool], None] | None = None
        """Hears each `bash()` process group of a Local kernel start (True) and end (False): a session keeps them
        in its journal, so a host that restarts still reaps them."""
        self.before_cell: Callable[[int, str], tuple[tuple[str, ...], tuple[str, ...]]] | None = None
        """Asked before each cell is sent, with the kernel's number (from 1) and the directory a venv of its Python
        has under `lib/`: the directories the kernel adds to its `sys.path` first, and the notices of the cell's
        answer (a session: its working directory's `.venv`, `eukhe.kernel.workspace_venv`)."""
        self.error_hint: Callable[[str, str, str], str | None] | None = None
        """Asked for each cell error (its type name, its message, the kernel's venv directory name): a line the
        error's traceback ends with (a missing module: how to install it), or None."""
        self.lives: list[tuple[int, Life]] = []
        """The last DIAGNOSTICS_KEPT steps of its kernels' lives: (which kernel, counting from 1; its life)."""
        self._active_at = self.clock.now_ms()
        """When the kernel last did or was asked anything (a cell sent, a frame read, a host request served)."""
        self._empty_output = BoundedOutput(truncation, None).close()  # the outcome's output of a silent cell
        self.background = BoundedOutput(truncation, artifact_dir, artifact_prefix="kernel-background")
        """Output of no cell in flight (a background task of an ended cell, a daemon subprocess)."""

    # ---- lifecycle ----------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The running kernel's pid (also its process group id), if one runs."""
        kernel = self._kernel
        return kernel.process.pid if kernel is not None and life_table.live(kernel.life) else None

    @property
    def takes_calls(self) -> bool:
        """Whether a kernel runs that takes remote calls (started, not ending: a call never starts one)."""
        return self._kernel is not None and life_table.takes_calls(self._kernel.life)

    @property
    def busy(self) -> bool:
        """Whether the kernel has work in flight: a cell (one waiting for the kernel to start too), a remote call, a
        host request it made (an `rlm.*` call, a child), or an interrupt; idle culling never stops a busy kernel."""
        if self._cells_waiting:  # a cell waits for its kernel to start: that kernel is busy from its first moment
            return True
        kernel = self._kernel
        if kernel is None or not life_table.live(kernel.life):
            return False
        return bool(kernel.work)

    def idle_s(self) -> float:
        """Seconds since the kernel last did or was asked anything (on the manager's clock)."""
        return (self.clock.now_ms() - self._active_at) / 1000

    def _touch(self) -> None:
        self._active_at = self.clock.now_ms()

    async def start(self) -> None:
        """Start a kernel now (else the first cell starts it)."""
        await self._ensure()

    async def __aenter__(self) -> KernelManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Kill the kernel and wait for everything this manager started to end."""
        self._closed = True
        await self.kill()
        while self._ending:
            await asyncio.gather(*list(self._ending), return_exceptions=True)
        self.background.close()

    async def kill(self, *, snapshot: bool = False) -> None:
        """Kill the kernel: close its stdin, then signal its process group; its cells end as killed. `snapshot`
        (idle culling): first ask it to write its namespace snapshot and stop, which the next kernel reads back;
        it has SNAPSHOT_GRACE_MS to answer (its notes on what the snapshot holds arrive as diagnostics)."""
        kernel, self._kernel = self._kernel, None
        if kernel is None:
            return
        if snapshot and kernel.process.launch.snapshot and life_table.takes_calls(kernel.life):
            settled = kernel.snapshot_settled = asyncio.get_running_loop().create_future()
            self._feel(kernel, LifeEvent.SNAPSHOT_STOP)
            await wait_within(self.clock, settled, SNAPSHOT_GRACE_MS)
        self._feel(kernel, LifeEvent.KILL)
        await self._ended(kernel)

    async def _ended(self, kernel: _Kernel) -> None:
        """Wait for a kernel's termination, if it began (its cells have ended when it is done)."""
        if kernel.ending is not None:
            await asyncio.shield(kernel.ending)

    async def _ensure(self) -> _Kernel:
        if self._closed:
            raise KernelClosedError("the kernel manager is closed")
        async with self._start_lock:
            # A kernel whose end began (its stdout closed, a kill, a fault) takes no new cell: the next one starts.
            if self._kernel is None or not life_table.takes_cells(self._kernel.life):
                self._kernel = await self._spawn()
            return self._kernel

    async def _spawn(self) -> _Kernel:
        planned = self._launch()
        launch = await planned if inspect.isawaitable(planned) else planned
        for diagnostic in launch.diagnostics:
            self._diagnose(diagnostic)
        process = await KernelProcess.spawn(launch, self._cwd)
        ready = asyncio.get_running_loop().create_future()
        reader, work = FrameReader(frozenset(self.handlers), self.limits), inflight.InFlight(self.background)
        kernel = _Kernel(process, reader, ready, work)
        process.attach(lambda data: self._on_stdout(kernel, data))
        kernel.watch = asyncio.create_task(self._watch_stdout(kernel))
        self.kernels_started += 1
        kernel.number = self.kernels_started
        self._note(kernel)
        try:
            answered = await wait_within(self.clock, kernel.ready, self._start_timeout_ms)
        except asyncio.CancelledError:  # the start was cancelled: the half-started kernel is not left running
            self._feel(kernel, LifeEvent.KILL)
            await self._ended(kernel)
            raise
        if not answered:
            self._feel(kernel, LifeEvent.START_TIMEOUT)
        failed = not answered or kernel.ready.exception() is not None
        if failed or kernel.ready.result().protocol != PROTOCOL_VERSION:
            self._feel(kernel, LifeEvent.KILL)  # a failed start's kernel is ending already: ignored
            await self._ended(kernel)
            if not failed:
                protocol = kernel.ready.result().protocol
                raise KernelStartError(
                    f"the Python kernel speaks protocol {protocol!r}, the host speaks {PROTOCOL_VERSION}"
                )
            why = kernel.ready.exception() if answered else f"no ready frame within {self._start_timeout_ms} ms"
            tail = process.tail()
            raise KernelStartError(f"the Python kernel did not start: {why}" + (f"\n{tail}" if tail else ""))
        process.started()
        return kernel

    # ---- the life table's effects ------------------------------------------------------------------------

    def _note(self, kernel: _Kernel) -> None:
        self.lives.append((kernel.number, kernel.life))
        del self.lives[:-DIAGNOSTICS_KEPT]

    def _feel(self, kernel: _Kernel, event: LifeEvent, detail: wire.ReadyFrame | ProtocolFault | None = None) -> bool:
        """Step the kernel's life on `event` and perform the table's effects; True if the frame is to be acted on."""
        before = kernel.life
        kernel.life, effects = life_table.step(before, event)
        if kernel.life != before:
            self._note(kernel)
        for effect in effects:
            self._perform(kernel, effect, detail)
        return life_table.DELIVER in effects

    def _perform(self, kernel: _Kernel, effect: Effect, detail: wire.ReadyFrame | ProtocolFault | None) -> None:
        match effect:
            case life_table.SettleReady() if isinstance(detail, wire.ReadyFrame):
                kernel.ready.set_result(detail)
            case life_table.RecordFault() if isinstance(detail, ProtocolFault):
                self._record_fault(kernel, detail)
            case life_table.FailCalls():
                reason = kernel.life.reason
                kernel.work.fail_calls("" if reason is None else f": {self._error(kernel, reason)}")
            case life_table.SendShutdown():
                kernel.stop_id = f"stop-{next(self._ids)}"
                if not self._send(kernel, wire.ShutdownRequest(id=kernel.stop_id, snapshot=True)):
                    self._feel(kernel, LifeEvent.KILL)  # it cannot hear the stop: no snapshot
            case life_table.SettleSnapshot(written=written):
                if kernel.snapshot_settled is not None and not kernel.snapshot_settled.done():
                    kernel.snapshot_settled.set_result(written)
            case life_table.Terminate() if kernel.ending is None:
                kernel.ending = asyncio.create_task(self._terminate(kernel))
                self._ending.add(kernel.ending)
                kernel.ending.add_done_callback(self._ending.discard)
            case life_table.End(reason=reason):
                self._end_inflight(kernel, reason)
            case _:
                pass

    async def _terminate(self, kernel: _Kernel) -> None:
        """End the process and everything of it; then its life ends (EXITED) and so does what is in flight."""
        try:
            await kernel.process.terminate(self.clock, KILL_GRACE_MS, kernel.child_groups)  # only a Local's
        finally:
            kernel.child_groups.clear()
            await kernel.work.stop_serving()
            await asyncio.gather(*filter(None, [kernel.watch]), return_exceptions=True)
            self._feel(kernel, LifeEvent.EXITED)

    async def _watch_stdout(self, kernel: _Kernel) -> None:
        """Its stdout closed (then, within the kill's grace, it exited: a death tells its exit code): an event."""
        await kernel.process.stdout_closed
        await wait_within(self.clock, kernel.process.exited, KILL_GRACE_MS)
        self._feel(kernel, LifeEvent.STDOUT_CLOSED)

    def _record_fault(self, kernel: _Kernel, fault: ProtocolFault) -> None:
        self.faults.append(fault)
        del self.faults[:-DIAGNOSTICS_KEPT]
        self._diagnose(
            f"protocol repair: the Python kernel (pid {kernel.process.pid}) wrote a frame the host cannot answer "
            f"({fault.reason.value}: {fault.detail}); the kernel is replaced",
            logging.ERROR,
        )
        kernel.error = kernel.error or KernelProtocolError(fault)
        kernel.reader.faulted = True  # the cells' output is salvaged until the kernel is gone (the stub flushes)

    def _end_inflight(self, kernel: _Kernel, reason: Reason) -> None:
        """End what is in flight on a kernel whose life ended (once): its cells with their output so far."""
        if self._kernel is kernel:
            self._kernel = None
        error = self._error(kernel, reason)
        if not kernel.ready.done():
            kernel.ready.set_exception(error)
            kernel.ready.exception()  # retrieved: nobody else may wait on it
        kernel.work.end(CELL_STATUS[reason], error)

    @staticmethod
    def _error(kernel: _Kernel, reason: Reason) -> KernelError:
        return inflight.end_error(reason, kernel.error, kernel.process.returncode)

    # ---- requests to the kernel ---------------------------------------------------------------------------

    def _send(self, kernel: _Kernel, message: Record) -> bool:
        return life_table.live(kernel.life) and kernel.process.write(encode(message) + b"\n")

    async def execute(
        self,
        code: str,
        *,
        on_output: Callable[[bytes], None] | None = None,
        on_end: Callable[[CellOutcome], None] | None = None,
    ) -> CellRun:
        """Send a cell; it runs after the cells sent before it. The run's `wait()` gives its outcome.

        `on_output` gets every output byte of the cell and `on_end` its end, from before the request is sent.
        """
        self._touch()
        self._cells_waiting += 1
        try:
            kernel = await self._ensure()
        finally:
            self._cells_waiting -= 1
        self._touch()
        site_dirs, notices = self._prepare(kernel)
        cell_id = f"c{next(self._ids)}"
        run = CellRun(
            cell_id,
            lambda: BoundedOutput(self.truncation, self.artifact_dir, artifact_prefix=f"cell-{cell_id}"),
            self._empty_output,
            self.artifact_dir,
        )
        if on_output is not None or on_end is not None:
            run.add_listener(on_output or (lambda _data: None), on_end or (lambda _outcome: None))
        run.notices = notices
        kernel.work.cells[cell_id] = run
        self._send(kernel, wire.ExecuteRequest(id=cell_id, code=code, site_dirs=list(site_dirs) or None))
        await kernel.process.drain()
        return run

    async def run(self, code: str) -> CellOutcome:
        """Run a cell to its end."""
        return await (await self.execute(code)).wait()

    async def start_call(
        self, name: str, module: str, function: str, args: Mapping[str, Any]
    ) -> tuple[str, asyncio.Future[Any]]:
        """Send a remote call (request `call`) to the running kernel, on its call lane: it waits for no cell. Its
        future settles with the function's result or a `RemoteCallError` (`unknown`, `failed`; `unreachable` as
        soon as the kernel stops). No kernel running: `not_running` (a call never starts one)."""
        kernel = self._kernel
        if kernel is None or not self.takes_calls:
            raise RemoteCallError("not_running", "the session's Python kernel is not running: a cell starts it")
        if not kernel.process.stdin_open:
            raise RemoteCallError("unreachable", "the Python kernel is stopping: it takes no call")
        call_id = f"r{next(self._ids)}"
        line = kernel.work.call(call_id, name, module, function, args)
        future = kernel.work.calls[call_id]
        self._touch()
        kernel.process.write(line)
        await kernel.process.drain()
        return call_id, future

    def abandon_call(self, call_id: str) -> None:
        """The caller stopped waiting for a remote call (its bound passed, or it was cancelled): forget it, and
        interrupt it in the kernel (an `async def` call is cancelled; a sync function's thread goes on)."""
        kernel = self._kernel
        if kernel is None or kernel.work.calls.pop(call_id, None) is None:
            return
        self._send(kernel, wire.InterruptRequest(id=f"i{next(self._ids)}", target=call_id))

    async def interrupt(self, cell_id: str | None = None, timeout_ms: int = 5000) -> bool:
        """Interrupt the running cell (or `cell_id`, also one not started yet); True if the kernel found it within
        `timeout_ms` on the manager's clock."""
        kernel = self._kernel
        if kernel is None or not life_table.takes_calls(kernel.life):
            return False
        request_id = f"i{next(self._ids)}"
        future: asyncio.Future[wire.DoneFrame] = asyncio.get_running_loop().create_future()
        kernel.work.controls[request_id] = future
        if not self._send(kernel, wire.InterruptRequest(id=request_id, target=cell_id)):
            kernel.work.controls.pop(request_id, None)
            return False
        if not await wait_within(self.clock, future, timeout_ms):
            kernel.work.controls.pop(request_id, None)
            future.cancel()
            return False
        return bool(future.result().found)

    # ---- frames from the kernel ---------------------------------------------------------------------------

    def _on_stdout(self, kernel: _Kernel, data: bytes) -> None:
        """Kernel stdout, as it comes: the splitter and the gate judge each frame, the table says what is done."""
        if not life_table.reads(kernel.life):
            return
        self._touch()
        try:
            for verdict in kernel.reader.feed(data):
                self._route(kernel, verdict)
        except Exception as exc:  # the host failed to act on a frame (e.g. a full disk under an artifact)
            error = KernelError(f"the host could not read the Python kernel's output: {type(exc).__name__}: {exc}")
            self._diagnose(f"{error}; the kernel is replaced", logging.ERROR)
            kernel.error = kernel.error or error
            self._feel(kernel, LifeEvent.HOST_FAILED)

    def _route(self, kernel: _Kernel, verdict: object) -> None:
        if isinstance(verdict, ProtocolFault):
            self._feel(kernel, LifeEvent.FAULT, verdict)
        elif isinstance(verdict, Event):
            try:  # a frame that does not fit its record is a protocol fault
                what = f"a kernel {verdict.event} frame"
                record = wire.KERNEL_EVENT_RECORDS.get(verdict.event, wire.KernelEvent)
                frame: wire.KernelEvent = convert(verdict.frame, record, code="malformed", what=what)
            except InputError as exc:
                self._feel(kernel, LifeEvent.FAULT, ProtocolFault(FaultReason.NOT_PROTOCOL, str(exc)))
                return
            event = inflight.LIFE_EVENT[type(frame)]
            if isinstance(frame, wire.DoneFrame) and frame.id is not None and frame.id == kernel.stop_id:
                event = LifeEvent.SNAPSHOT_DONE
            if self._feel(kernel, event, frame if isinstance(frame, wire.ReadyFrame) else None):
                self._act(kernel, frame)
        elif isinstance(verdict, Admission) and self._feel(kernel, LifeEvent.HOST_REQUEST):
            kernel.work.serve(verdict, self.handlers[verdict.kind], lambda reply: self._reply(kernel, reply))
        elif isinstance(verdict, Refusal) and self._feel(kernel, LifeEvent.REFUSAL):
            if verdict.status == "duplicate":
                self._diagnose(f"the kernel repeated host-request id {verdict.id!r}: answered `duplicate`, no handler")
            self._send(kernel, inflight.refusal_reply(verdict))
        elif isinstance(verdict, Dropped) and self._feel(kernel, LifeEvent.DROPPED):
            self._diagnose(verdict.diagnostic)

    def _diagnose(self, message: str, level: int = logging.WARNING) -> None:
        self.diagnostics.append(message)
        del self.diagnostics[:-DIAGNOSTICS_KEPT]
        log.log(level, "%s", message)

    def _reply(self, kernel: _Kernel, reply: Record) -> None:
        self._touch()
        self._send(kernel, reply)

    def _act(self, kernel: _Kernel, frame: wire.KernelEvent) -> None:
        """What the host does with an event frame the table lets it act on."""
        if isinstance(frame, wire.ProcessFrame):
            if frame.pgid > 1 and kernel.process.launch.host_pids:  # another pid namespace's pids: not the host's
                (kernel.child_groups.add if frame.state == "started" else kernel.child_groups.discard)(frame.pgid)
                if self.on_child_group is not None:
                    self.on_child_group(frame.pgid, frame.state == "started")
        elif isinstance(frame, wire.DiagnosticFrame):
            self._diagnose(f"python kernel: {frame.message}")
        elif not isinstance(frame, wire.ReadyFrame):
            if isinstance(frame, wire.ErrorFrame) and self.error_hint is not None:
                frame = self._hinted(kernel, frame)
            kernel.work.act(frame)

    def _prepare(self, kernel: _Kernel) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What `before_cell` says for the next cell on `kernel` (one that fails is logged: the cell runs as it is)."""
        if self.before_cell is None:
            return (), ()
        try:
            return self.before_cell(kernel.number, _lib(kernel))
        except Exception as exc:  # a cell is never lost to what is only added around it
            self._diagnose(f"preparing a cell failed: {type(exc).__name__}: {exc}")
            return (), ()

    def _hinted(self, kernel: _Kernel, frame: wire.ErrorFrame) -> wire.ErrorFrame:
        """The error with the hint's line at the end of its traceback, when there is one (a hint that fails is
        logged, and the error goes on as it came)."""
        assert self.error_hint is not None
        try:
            line = self.error_hint(frame.ename, frame.evalue, _lib(kernel))
        except Exception as exc:  # the hint must never cost the cell its error
            self._diagnose(f"the hint for a cell's {frame.ename} failed: {type(exc).__name__}: {exc}")
            return frame
        if line is None:
            return frame
        return msgspec.structs.replace(frame, traceback=[*frame.traceback, line + "\n"])


def _lib(kernel: _Kernel) -> str:
    """The directory a venv of the kernel's Python has under `lib/` (a started kernel's ready frame says it)."""
    ready = kernel.ready.result()
    return ready.lib or kernel_lib(ready.python)
