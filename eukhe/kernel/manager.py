"""The host side of the kernel (S3 "The protocol" 1-7, "Where the sandbox runs" 1, 7-8): `KernelManager`.

Theory of operation: the manager starts the kernel its launch names (Local: a child in its own process group with
the host's environment plus the owner pid; Wrapped: the wrapper, with the stub sent first on its stdin), then the
kernel's stdout goes, as it comes, through the one line splitter (`eukhe.core.lines`) and the pure gate
(`eukhe.core.gate.admit`), which decides each frame before anything acts on it; the host then decodes each event
frame strictly as its record. Accepted host
requests run as their own tasks and reply when they end (a long one does not hold back a short one); refusals
reply at once, in order. Events feed the cells in flight: output into each cell's `BoundedOutput`, then `done`
ends the cell. A `ProtocolFault` is repaired loudly: the kernel is killed, everything in flight fails with the
fault (keeping the output the cells wrote before it), and the next cell starts a fresh kernel. A kernel that dies
mid-cell ends its cells with `KernelDiedError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from eukhe.clock import Clock, wait_within
from eukhe.core.gate import (
    DEFAULT_LIMITS,
    Admission,
    Dropped,
    Event,
    FaultReason,
    GateLimits,
    ProtocolFault,
    Refusal,
    Verdict,
)
from eukhe.core.limits import DEFAULT_TRUNCATION, Truncation
from eukhe.errors import EukheError, InputError, error_code, error_details
from eukhe.kernel.errors import (
    KernelClosedError,
    KernelDiedError,
    KernelError,
    KernelProtocolError,
    KernelStartError,
    RemoteCallError,
)
from eukhe.kernel.launch import KernelLaunch, kernel_launch
from eukhe.kernel.splitter import FrameReader
from eukhe.output import BoundedOutput, BoundedResult
from eukhe.records.base import Record, convert, encode, strict_json
from eukhe.records.jobs import CellError, CellOutcomeName
from eukhe.records.kernel import (
    CallRequest,
    DiagnosticFrame,
    DisplayFrame,
    DoneFrame,
    ErrorFrame,
    ExecuteRequest,
    HostReplyError,
    HostReplyOk,
    HostReplyRefused,
    InterruptRequest,
    KernelEvent,
    ProcessFrame,
    ReadyFrame,
    ResultFrame,
    ShutdownRequest,
    StderrFrame,
    StdoutFrame,
)
from eukhe.sandbox.group import namespace_gone, namespace_of
from eukhe_kernel.protocol import PROTOCOL_VERSION

log = logging.getLogger("eukhe.kernel")

HostHandler = Callable[[Admission], Awaitable[Any]]
"""Serves one accepted host request; its return value (JSON) or its exception is the one reply."""

STDERR_TAIL = 8192
DIAGNOSTICS_KEPT = 256
"""The last diagnostics and faults a manager keeps (a session's kernel may live long and say much)."""
KILL_GRACE_S = 1.0
SNAPSHOT_GRACE_S = 60.0
"""How long a kernel stopped with a snapshot (idle culling) may take to pickle its namespace before it is killed."""
"""After closing stdin, how long the stub has to kill its `bash()` groups and exit before its group is killed."""


class KernelKilledError(KernelError):
    """The kernel was killed on purpose (a kill, a cancel past its grace, or the manager's close)."""

    code = "kernel_killed"


@dataclass(frozen=True, slots=True)
class CellOutcome:
    """How a cell ended: status, its bounded output, the repr of its trailing expression, its error."""

    id: str
    status: CellOutcomeName
    output: BoundedResult
    result: str | None
    error: CellError | None
    displays: tuple[Mapping[str, Any], ...] = ()


class CellRun:
    """A cell in flight: output goes to its `BoundedOutput` (and to listeners), `done` ends it exactly once."""

    def __init__(self, cell_id: str, make_output: Callable[[], BoundedOutput], empty: BoundedResult) -> None:
        self.id = cell_id
        self._make_output = make_output
        self._output: BoundedOutput | None = None
        self._empty = empty
        self.result: str | None = None
        self.error: CellError | None = None
        self.displays: list[Mapping[str, Any]] = []
        self._listeners: list[Callable[[bytes], None]] = []
        self._end_listeners: list[Callable[[CellOutcome], None]] = []
        self._done: asyncio.Future[CellOutcome] = asyncio.get_running_loop().create_future()
        self._waiters: list[asyncio.Future[CellOutcome]] = []

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
            tuple(self.displays),
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


class _KernelPipes(asyncio.subprocess.SubprocessStreamProtocol):
    """The kernel's pipes: stdout bytes go to the frame reader inside the callback (no reader task between)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self._on_stdout: Callable[[bytes], None] | None = None
        self._early: list[bytes] = []
        self.stdout_closed: asyncio.Future[None] = loop.create_future()

    def attach(self, on_stdout: Callable[[bytes], None]) -> None:
        """Start handing stdout to `on_stdout` (with what came before)."""
        self._on_stdout = on_stdout
        early, self._early = self._early, []
        for data in early:
            on_stdout(data)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if fd != 1:
            super().pipe_data_received(fd, data)
            return
        chunk = data.encode() if isinstance(data, str) else data
        if self._on_stdout is None:
            self._early.append(chunk)
        else:
            self._on_stdout(chunk)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        super().pipe_connection_lost(fd, exc)
        if fd == 1 and not self.stdout_closed.done():
            self.stdout_closed.set_result(None)


class _DirectStdout(asyncio.Protocol):
    """The stdout pipe's protocol: its bytes go to `_KernelPipes` at once; the subprocess transport would hand
    them on with `call_soon`, one loop turn later on every frame. The pipe's end still goes the transport's way."""

    def __init__(self, inner: asyncio.BaseProtocol, pipes: _KernelPipes) -> None:
        self._inner = inner
        self._pipes = pipes

    def data_received(self, data: bytes) -> None:
        self._pipes.pipe_data_received(1, data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if isinstance(self._inner, asyncio.Protocol) else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)


@dataclass(eq=False)
class _Kernel:
    """One kernel process and what is in flight on it."""

    process: asyncio.subprocess.Process
    pipes: _KernelPipes
    reader: FrameReader
    ready: asyncio.Future[ReadyFrame]
    cells: dict[str, CellRun] = field(default_factory=dict)
    controls: dict[str, asyncio.Future[DoneFrame]] = field(default_factory=dict)
    calls: dict[str, asyncio.Future[Any]] = field(default_factory=dict)  # remote calls awaiting their `done`
    host_tasks: set[asyncio.Task[None]] = field(default_factory=set)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    stderr_tail: bytearray = field(default_factory=bytearray)
    snapshot: bool = False  # it has a namespace snapshot file: idle culling asks it to write one
    child_groups: set[int] = field(default_factory=set)  # the stub's `bash()` process groups, reaped at its end
    host_pids: bool = True  # the stub's pids are the host's (Local): its groups may be reaped from here
    namespace: tuple[int, int] | None = None  # a confined kernel's pid 1 (pid, start ticks): its namespace's life
    end_reason: KernelError | None = None
    gone: bool = False  # retired: takes no new work; the next cell starts a fresh kernel
    ended: bool = False  # what was in flight has ended (after the process and its stdout are gone)


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
        start_timeout: float = 30.0,
    ) -> None:
        self.truncation = truncation
        self.artifact_dir = artifact_dir
        self.handlers: dict[str, HostHandler] = dict(handlers or {})
        self.limits = limits
        self._launch = launch
        self._cwd = cwd
        self._start_timeout = start_timeout
        self._kernel: _Kernel | None = None
        self._start_lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._ending: set[asyncio.Task[None]] = set()
        self.diagnostics: list[str] = []
        """The last DIAGNOSTICS_KEPT things the host said loudly: repairs, refusals of used ids, dropped frames,
        kernel notices (each is also logged)."""
        self.faults: list[ProtocolFault] = []
        self.kernels_started = 0
        self._stops = 0  # shutdown requests sent (their ids)
        self.on_child_group: Callable[[int, bool], None] | None = None
        """Hears each `bash()` process group of a Local kernel start (True) and end (False): a session keeps them
        in its journal, so a host that restarts still reaps them."""
        self._active_at = time.monotonic()
        """When the kernel last did or was asked anything (a cell sent, a frame read, a host request served)."""
        self._empty_output = BoundedOutput(truncation, None).close()  # the outcome's output of a silent cell
        self.background = BoundedOutput(truncation, artifact_dir, artifact_prefix="kernel-background")
        """Output of no cell in flight (a background task of an ended cell, a daemon subprocess)."""

    # ---- lifecycle ----------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The running kernel's pid (also its process group id), if one runs."""
        kernel = self._kernel
        return kernel.process.pid if kernel is not None and not kernel.gone else None

    @property
    def takes_calls(self) -> bool:
        """Whether a kernel runs that takes remote calls (started, not ending: a call never starts one)."""
        kernel = self._kernel
        return kernel is not None and not kernel.gone and kernel.end_reason is None and kernel.ready.done()

    @property
    def busy(self) -> bool:
        """Whether the kernel has work in flight: a cell, a remote call, a host request it made (an `rlm.*` call, a
        child), or an interrupt; idle culling never stops a busy kernel."""
        kernel = self._kernel
        if kernel is None or kernel.gone:
            return False
        in_flight = kernel.cells or kernel.calls or kernel.controls
        return bool(in_flight or any(not task.done() for task in kernel.host_tasks))

    def idle_s(self) -> float:
        """Seconds since the kernel last did or was asked anything (monotonic clock)."""
        return time.monotonic() - self._active_at

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
        (idle culling): first ask it to write its namespace snapshot and stop, which the next kernel reads back."""
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            if snapshot:
                await self._stop_with_snapshot(kernel)
            await self._terminate(
                kernel, KernelKilledError("the Python kernel was killed; the next cell starts a fresh one")
            )

    async def _stop_with_snapshot(self, kernel: _Kernel) -> None:
        """Ask a ready kernel with a snapshot file to write its snapshot and exit; wait SNAPSHOT_GRACE_S for it (the
        kill that follows ends it anyway). Its notes on what the snapshot holds arrive as diagnostics."""
        if not kernel.snapshot or kernel.gone or kernel.end_reason is not None or not kernel.ready.done():
            return
        self._stops += 1
        if not self._send(kernel, ShutdownRequest(id=f"stop-{self._stops}", snapshot=True)):
            return
        # Set before the next await, so its exit reads as a stop, not a death.
        kernel.end_reason = KernelKilledError(
            "the Python kernel was stopped; the next cell starts a fresh one with its namespace snapshot"
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(kernel.process.wait(), SNAPSHOT_GRACE_S)

    async def _ensure(self) -> _Kernel:
        if self._closed:
            raise KernelClosedError("the kernel manager is closed")
        async with self._start_lock:
            # A kernel whose end began (its stdout closed, a kill) takes no new cell: the next one starts afresh.
            if self._kernel is None or self._kernel.gone or self._kernel.end_reason is not None:
                self._kernel = await self._spawn()
            return self._kernel

    async def _spawn(self) -> _Kernel:
        planned = self._launch()
        launch = await planned if inspect.isawaitable(planned) else planned
        for diagnostic in launch.diagnostics:
            self._diagnose(diagnostic)
        loop = asyncio.get_running_loop()
        try:
            transport, pipes = await loop.subprocess_exec(
                lambda: _KernelPipes(loop),
                *launch.argv,
                env=dict(launch.env),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                process_group=0,
                cwd=launch.cwd or self._cwd,
            )
        except OSError as exc:
            raise KernelStartError(f"the Python kernel could not start ({launch.argv[0]}): {exc}") from exc
        process = asyncio.subprocess.Process(transport, pipes, loop)
        if launch.preamble and process.stdin is not None:
            process.stdin.write(launch.preamble)  # a wrapped kernel's stub, before any request
        stdout_pipe = transport.get_pipe_transport(1)
        if isinstance(stdout_pipe, asyncio.ReadTransport):
            stdout_pipe.set_protocol(_DirectStdout(stdout_pipe.get_protocol(), pipes))
        reader = FrameReader(frozenset(self.handlers), self.limits)
        kernel = _Kernel(process, pipes, reader, loop.create_future(), snapshot=launch.snapshot)
        kernel.host_pids = launch.host_pids
        pipes.attach(lambda data: self._on_stdout(kernel, data))
        kernel.tasks.append(asyncio.create_task(self._watch_stdout(kernel)))
        kernel.tasks.append(asyncio.create_task(self._read_stderr(kernel)))
        self.kernels_started += 1
        try:
            ready = await asyncio.wait_for(asyncio.shield(kernel.ready), self._start_timeout)
        except asyncio.CancelledError:  # the start was cancelled: the half-started kernel is not left running
            await self._terminate(kernel, KernelStartError("the Python kernel's start was cancelled"))
            raise
        except (TimeoutError, KernelError) as exc:
            await self._terminate(kernel, KernelStartError("the Python kernel did not start"))
            tail = kernel.stderr_tail.decode("utf-8", "replace").strip()
            raise KernelStartError(f"the Python kernel did not start: {exc}" + (f"\n{tail}" if tail else "")) from exc
        if ready.protocol != PROTOCOL_VERSION:
            await self._terminate(kernel, KernelStartError("protocol version mismatch"))
            raise KernelStartError(
                f"the Python kernel speaks protocol {ready.protocol!r}, the host speaks {PROTOCOL_VERSION}"
            )
        if launch.pid_namespace:
            kernel.namespace = namespace_of(process.pid)
        return kernel

    async def _terminate(self, kernel: _Kernel, reason: KernelError) -> None:
        """Close stdin, give the stub a grace to reap its `bash()` groups, then kill its group; end its requests."""
        if kernel.end_reason is None:
            kernel.end_reason = reason
        self._fail_calls(kernel)  # at once: a remote call does not wait for the kill's grace (S3 @remote 3)
        process = kernel.process
        stdin = process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), KILL_GRACE_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if kernel.namespace is not None:  # its pid namespace ends after bwrap: wait until nothing of it runs
            await namespace_gone(kernel.namespace)
        self._reap_children(kernel)
        for task in kernel.host_tasks:
            task.cancel()
        await asyncio.gather(*kernel.tasks, *kernel.host_tasks, return_exceptions=True)
        self._end_inflight(kernel, KernelDiedError(process.returncode))
        if stdin is not None:
            with contextlib.suppress(Exception):
                await stdin.wait_closed()

    @staticmethod
    def _reap_children(kernel: _Kernel) -> None:
        """Kill the `bash()` process groups the stub told us of and did not report ended (it may have died first)."""
        for pgid in sorted(kernel.child_groups):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        kernel.child_groups.clear()

    def _end_later(self, kernel: _Kernel, reason: KernelError) -> None:
        task = asyncio.create_task(self._terminate(kernel, reason))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    def _retire(self, kernel: _Kernel) -> None:
        """The kernel takes no new work: the next cell starts a fresh kernel (what is in flight ends later)."""
        kernel.gone = True
        if self._kernel is kernel:
            self._kernel = None
        self._fail_calls(kernel)

    @staticmethod
    def _fail_calls(kernel: _Kernel) -> None:
        """The kernel stopped before replying to its remote calls: each answers `unreachable` now."""
        reason = kernel.end_reason
        why = f": {reason}" if reason is not None else ""
        for future in kernel.calls.values():
            if not future.done():
                future.set_exception(
                    RemoteCallError("unreachable", f"the Python kernel stopped before the call's reply{why}")
                )
        kernel.calls.clear()

    def _gone(self, kernel: _Kernel, died: KernelError) -> None:
        """The kernel is gone: retire it and fail what is in flight (once)."""
        self._retire(kernel)
        self._end_inflight(kernel, died)

    def _end_inflight(self, kernel: _Kernel, died: KernelError) -> None:
        """End what is in flight on a kernel that is gone (once): its cells with their output so far."""
        self._retire(kernel)
        if kernel.ended:
            return
        kernel.ended = True
        reason = kernel.end_reason or died
        status = (
            "fault"
            if isinstance(reason, KernelProtocolError)
            else "killed"
            if isinstance(reason, KernelKilledError)
            else "died"
        )
        if not kernel.ready.done():
            kernel.ready.set_exception(reason)
            kernel.ready.exception()  # retrieved: nobody else may wait on it
        for run in list(kernel.cells.values()):
            run.finish(status, _error_of(reason))
        kernel.cells.clear()
        for future in kernel.controls.values():
            if not future.done():
                future.set_result(DoneFrame(id=None, status="error", reason=str(reason)))
        kernel.controls.clear()

    # ---- requests to the kernel ---------------------------------------------------------------------------

    def _send(self, kernel: _Kernel, message: Record) -> bool:
        stdin = kernel.process.stdin
        if kernel.gone or stdin is None or stdin.is_closing():
            return False
        stdin.write(encode(message) + b"\n")
        return True

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
        kernel = await self._ensure()
        self._active_at = time.monotonic()
        cell_id = f"c{next(self._ids)}"
        run = CellRun(
            cell_id,
            lambda: BoundedOutput(self.truncation, self.artifact_dir, artifact_prefix=f"cell-{cell_id}"),
            self._empty_output,
        )
        if on_output is not None or on_end is not None:
            run.add_listener(on_output or (lambda _data: None), on_end or (lambda _outcome: None))
        kernel.cells[cell_id] = run
        self._send(kernel, ExecuteRequest(id=cell_id, code=code))
        stdin = kernel.process.stdin
        if stdin is not None:
            with contextlib.suppress(ConnectionError):
                await stdin.drain()
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
        try:
            strict_json(dict(args), "the arguments")
            request = CallRequest(
                id=f"r{next(self._ids)}", name=name, module=module, function=function, args=dict(args)
            )
            line = encode(request) + b"\n"
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            raise RemoteCallError("failed", f"the arguments are not JSON: {exc}", reason="bad_arguments") from None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stdin = kernel.process.stdin
        if stdin is None or stdin.is_closing():
            raise RemoteCallError("unreachable", "the Python kernel is stopping: it takes no call")
        kernel.calls[request.id] = future
        self._active_at = time.monotonic()
        stdin.write(line)
        with contextlib.suppress(ConnectionError):
            await stdin.drain()
        return request.id, future

    def abandon_call(self, call_id: str) -> None:
        """The caller stopped waiting for a remote call (its bound passed, or it was cancelled): forget it, and
        interrupt it in the kernel (an `async def` call is cancelled; a sync function's thread goes on)."""
        kernel = self._kernel
        if kernel is None or kernel.calls.pop(call_id, None) is None:
            return
        self._send(kernel, InterruptRequest(id=f"i{next(self._ids)}", target=call_id))

    async def interrupt(self, cell_id: str | None = None, timeout: float = 5.0, clock: Clock | None = None) -> bool:
        """Interrupt the running cell (or `cell_id`, also one not started yet); True if the kernel found it. The
        wait for the kernel's answer runs on `clock` when given (a job's), else the loop's."""
        kernel = self._kernel
        if kernel is None or kernel.gone:
            return False
        request_id = f"i{next(self._ids)}"
        future: asyncio.Future[DoneFrame] = asyncio.get_running_loop().create_future()
        kernel.controls[request_id] = future
        if not self._send(kernel, InterruptRequest(id=request_id, target=cell_id)):
            kernel.controls.pop(request_id, None)
            return False
        if clock is not None:
            answered = await wait_within(clock, future, round(timeout * 1000))
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), timeout)
            answered = future.done()
        if not answered:
            kernel.controls.pop(request_id, None)
            future.cancel()
            return False
        return bool(future.result().found)

    # ---- frames from the kernel ---------------------------------------------------------------------------

    def _on_stdout(self, kernel: _Kernel, data: bytes) -> None:
        """Kernel stdout, as it comes: the splitter and the gate decide each frame, then the host acts on it. After
        a fault the reader salvages only the output of the cells in flight, until the kernel is gone."""
        if kernel.ended:
            return
        self._active_at = time.monotonic()
        try:
            for verdict in kernel.reader.feed(data):
                if isinstance(verdict, ProtocolFault):
                    self._repair(kernel, verdict)
                else:
                    self._act(kernel, verdict)
        except Exception as exc:  # the host failed to act on a frame (e.g. a full disk under an artifact)
            error = KernelError(f"the host could not read the Python kernel's output: {type(exc).__name__}: {exc}")
            self._diagnose(f"{error}; the kernel is replaced", logging.ERROR)
            kernel.end_reason = error
            self._gone(kernel, error)
            self._end_later(kernel, error)

    async def _watch_stdout(self, kernel: _Kernel) -> None:
        """The kernel's stdout closed: unless the host ended it on purpose, it died; its requests end."""
        await kernel.pipes.stdout_closed
        if kernel.end_reason is None:
            kernel.end_reason = KernelDiedError(await kernel.process.wait())
            self._end_later(kernel, kernel.end_reason)

    async def _read_stderr(self, kernel: _Kernel) -> None:
        """The stub's own stderr (start-up failures): kept as a tail and logged."""
        stderr = kernel.process.stderr
        assert stderr is not None
        while data := await stderr.read(65536):
            kernel.stderr_tail += data
            del kernel.stderr_tail[:-STDERR_TAIL]
            log.warning("python kernel stderr: %s", data.decode("utf-8", "replace").rstrip())

    def _repair(self, kernel: _Kernel, fault: ProtocolFault) -> None:
        """Protocol repair: loudly replace the kernel; what is in flight fails with the fault."""
        self.faults.append(fault)
        del self.faults[:-DIAGNOSTICS_KEPT]
        self._diagnose(
            f"protocol repair: the Python kernel (pid {kernel.process.pid}) wrote a frame the host cannot answer "
            f"({fault.reason.value}: {fault.detail}); the kernel is replaced",
            logging.ERROR,
        )
        error = KernelProtocolError(fault)
        kernel.end_reason = error
        kernel.reader.faulted = True
        # The cells in flight end once the kernel is gone, with the output they wrote before the fault: the stub
        # flushes what it holds when its stdin closes, and the reader salvages those output frames.
        self._retire(kernel)
        self._end_later(kernel, error)

    def _diagnose(self, message: str, level: int = logging.WARNING) -> None:
        self.diagnostics.append(message)
        del self.diagnostics[:-DIAGNOSTICS_KEPT]
        log.log(level, "%s", message)

    def _act(self, kernel: _Kernel, verdict: Verdict) -> None:
        if kernel.gone and not isinstance(verdict, Event):
            return  # a retired kernel (after a fault) is read only for its cells' output
        if isinstance(verdict, Admission):
            task = asyncio.create_task(self._serve(kernel, verdict, self.handlers[verdict.kind]))
            kernel.host_tasks.add(task)
            task.add_done_callback(kernel.host_tasks.discard)
        elif isinstance(verdict, Refusal):
            if verdict.status == "duplicate":
                self._diagnose(f"the kernel repeated host-request id {verdict.id!r}: answered `duplicate`, no handler")
            error = HostReplyError(code=verdict.reason.value, message=verdict.message)
            duplicate = verdict.status == "duplicate"
            reply = HostReplyRefused(id=verdict.id, status="duplicate" if duplicate else "error", error=error)
            self._send(kernel, reply)
        elif isinstance(verdict, Dropped):
            self._diagnose(verdict.diagnostic)
        elif isinstance(verdict, Event):
            self._on_event(kernel, verdict)

    async def _serve(self, kernel: _Kernel, admission: Admission, handler: HostHandler) -> None:
        """Run one accepted host request's handler; its result or its error is the one reply."""
        reply: Record
        try:
            result = await handler(admission)
            self._active_at = time.monotonic()
            strict_json(result, "the handler's result")  # NaN or infinity: an error reply, not a silent null
            reply = HostReplyOk(id=admission.id, status="ok", result=result)
            encode(reply)  # a result that is not JSON at all is an error reply too
        except asyncio.CancelledError:
            raise
        except EukheError as exc:  # first: a refusal may be a ValueError too (a UsageError), and is not unencodable
            error = HostReplyError(code=error_code(exc), message=str(exc), details=error_details(exc))
            reply = HostReplyRefused(id=admission.id, status="error", error=error)
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            error = HostReplyError(code="unencodable", message=f"the handler's result is not JSON: {exc}")
            reply = HostReplyRefused(id=admission.id, status="error", error=error)
        except Exception as exc:
            error = HostReplyError(code="handler_error", message=f"{type(exc).__name__}: {exc}")
            reply = HostReplyRefused(id=admission.id, status="error", error=error)
        self._active_at = time.monotonic()
        self._send(kernel, reply)

    def _cell_for(self, kernel: _Kernel, cell_id: str | None) -> CellRun | None:
        if cell_id is None:  # untagged raw output: the running cell is the oldest in flight
            return next(iter(kernel.cells.values()), None)
        return kernel.cells.get(cell_id)

    def _on_event(self, kernel: _Kernel, event: Event) -> None:
        """Decode an event frame strictly (a frame that does not fit its record is a protocol fault), then act."""
        try:
            frame: KernelEvent = convert(
                event.frame, KernelEvent, code="malformed", what=f"a kernel {event.event} frame"
            )
        except InputError as error:
            if not kernel.gone:
                self._repair(kernel, ProtocolFault(FaultReason.NOT_PROTOCOL, str(error)))
            return
        if kernel.gone and not isinstance(frame, StdoutFrame | StderrFrame | DisplayFrame):
            return  # after a fault only the cells' output is salvaged
        self._EVENTS[type(frame)](self, kernel, frame)

    def _on_stream(self, kernel: _Kernel, frame: StdoutFrame | StderrFrame) -> None:
        run = self._cell_for(kernel, frame.id)
        (run.write if run is not None else self.background.write)(_text_bytes(frame.text))

    def _on_done(self, kernel: _Kernel, frame: DoneFrame) -> None:
        run = kernel.cells.pop(frame.id, None) if frame.id is not None else None
        if run is not None:
            run.finish(frame.status)
        elif frame.id is not None and frame.id in kernel.controls:
            kernel.controls.pop(frame.id).set_result(frame)
        elif frame.id is not None and frame.id in kernel.calls:
            _settle_call(kernel.calls.pop(frame.id), frame)

    def _on_result(self, kernel: _Kernel, frame: ResultFrame) -> None:
        run = self._cell_for(kernel, frame.id) if frame.id is not None else None
        if run is not None:
            run.result = frame.repr

    def _on_error(self, kernel: _Kernel, frame: ErrorFrame) -> None:
        run = self._cell_for(kernel, frame.id) if frame.id is not None else None
        if run is not None:
            run.error = CellError(ename=frame.ename, evalue=frame.evalue, traceback=list(frame.traceback))

    def _on_display(self, kernel: _Kernel, frame: DisplayFrame) -> None:
        run = self._cell_for(kernel, frame.id) if frame.id is not None else None
        plain = frame.data.get("text/plain")
        text = (plain if isinstance(plain, str) else "<display>") + "\n"
        if run is not None:
            run.displays.append(frame.data)
            run.write(_text_bytes(text))
        else:
            self.background.write(_text_bytes(text))

    def _on_ready(self, kernel: _Kernel, frame: ReadyFrame) -> None:
        if not kernel.ready.done():
            kernel.ready.set_result(frame)

    def _on_process(self, kernel: _Kernel, frame: ProcessFrame) -> None:
        if frame.pgid > 1 and kernel.host_pids:  # another pid namespace's pids name no process of the host's
            if frame.state == "started":
                kernel.child_groups.add(frame.pgid)
            else:
                kernel.child_groups.discard(frame.pgid)
            if self.on_child_group is not None:
                self.on_child_group(frame.pgid, frame.state == "started")

    def _on_diagnostic(self, kernel: _Kernel, frame: DiagnosticFrame) -> None:
        self._diagnose(f"python kernel: {frame.message}")

    _EVENTS: ClassVar[dict[type, Callable[[KernelManager, _Kernel, Any], None]]] = {
        StdoutFrame: _on_stream,
        StderrFrame: _on_stream,
        DoneFrame: _on_done,
        ResultFrame: _on_result,
        ErrorFrame: _on_error,
        DisplayFrame: _on_display,
        ReadyFrame: _on_ready,
        ProcessFrame: _on_process,
        DiagnosticFrame: _on_diagnostic,
    }
    """What the host does with each kernel event (a table: one handler per frame record)."""
