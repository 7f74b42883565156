"""The kernel stub's runtime (S3 "The protocol", "Where the sandbox runs" 7-8): cells on one asyncio loop.

Theory of operation:
- fd 0 and fd 1 carry the protocol, so they are first duplicated privately (non-inheritable); fd 0 becomes
  /dev/null and fd 1/2 become pipes that pump threads read, so raw writes from C code and subprocesses are captured
  (untagged). Python-level `sys.stdout`/`sys.stderr` writes are tagged with the cell id (a context variable, so
  background tasks a cell starts keep its tag).
- Requests are read by the loop while no cell runs, and by a reader thread while one does (`eukhe_kernel.requests`),
  so `interrupt` and `shutdown` work while a synchronous cell holds the loop. Host replies resolve thread-safe
  futures where they are read. A `call` of an `@rlm.remote` function starts there too, on the kernel's call lane
  (`eukhe_kernel.calls`): never behind a cell.
- One worker task runs cells in order, each as its own task in one persistent namespace; compiled with top-level
  await. Background tasks keep running between cells.
- SIGINT: our own handler. If the running cell's code is on the stack, it raises KeyboardInterrupt there; else
  (the cell is awaiting) it cancels the cell's task. A SIGINT inside a frame write is deferred until the write ends.
"""

from __future__ import annotations

import ast
import asyncio
import codecs
import concurrent.futures
import contextlib
import contextvars
import fcntl
import functools
import inspect
import json
import linecache
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import traceback
import types
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

from eukhe_kernel import pictures, snapshot
from eukhe_kernel.calls import CallLane
from eukhe_kernel.frames import PROTECTED_CODES, FrameWriter
from eukhe_kernel.protocol import (
    MAX_PAYLOAD_BYTES,
    PROTOCOL_VERSION,
    RESULT_REPR_CHARS,
    PayloadTooLargeError,
    encode_frame,
)
from eukhe_kernel.requests import RequestReader

INTERRUPT_REPEAT_S = 0.05
"""How long an interrupt waits for the SIGINT handler to act on it before the signal is sent again."""

CELL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("eukhe_cell_id", default=None)
"""The id of the cell whose code is running (inherited by the tasks it starts)."""

PROTOCOL_FD: int = -1
"""The private protocol output fd (tests use it to write a malformed line on purpose)."""

TRACEBACK_CHARS = 256 * 1024
SWITCH_INTERVAL_S = 0.0002
"""How long a thread waits for the GIL before asking for it: an in-band interrupt of a busy cell waits this long
on the reader thread (Python's default 5 ms would be most of an interrupt's latency; 0.5 ms was half of ours)."""
EOF_GRACE_S = 30.0
"""After stdin EOF a synchronous cell may hold the loop; the reader side exits after this (S3 sandbox 7)."""

_RUNNING: Kernel | None = None
"""The kernel this process runs, once it runs (read only through `running_kernel`)."""

_REQUEST_DECODER = json.JSONDecoder()
"""Request lines are UTF-8: decoded here, without json.loads's detection of the encoding on every line."""

_LIBC: Any = None
_LIBC_LOADED = threading.Event()


def _load_libc() -> None:
    """Load libc for `fflush` off the start-up path (ctypes costs milliseconds to import)."""
    global _LIBC
    try:
        import ctypes  # noqa: PLC0415 - lazy on purpose: the handshake does not wait for it

        _LIBC = ctypes.CDLL(None)
    except (ImportError, OSError):  # no libc to flush: nothing buffered there either
        _LIBC = None
    finally:
        _LIBC_LOADED.set()


def running_kernel() -> Kernel:
    """The kernel this process runs: the one process-wide handle, for what cells call as plain functions (`display`,
    `bash`, `rlm`), which have no kernel to be given. Outside a running kernel: RuntimeError."""
    if _RUNNING is None:
        raise RuntimeError("not running inside the eukhe kernel")
    return _RUNNING


class HostRequestError(Exception):
    """The host answered a host request with an error (`code` says which: over_limit, unserved, handler_error...;
    `details` what the handler added, e.g. a file tool's `reason`)."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details


@dataclass
class Cell:
    """The running cell: its id, its compiled code objects, its task, whether an interrupt reached it."""

    id: str
    codes: set[CodeType] = field(default_factory=set)
    task: asyncio.Task[tuple[Any, BaseException | None]] | None = None
    final: list[bytes] = field(default_factory=list)  # the result or error frame, written with the done
    interrupted: bool = False
    heard: threading.Event | None = None  # made by the first in-band interrupt: set once the SIGINT handler acted

    def hear(self) -> None:
        """The SIGINT handler acted on an interrupt (one sent by a `kill -INT` from outside has no event)."""
        if self.heard is not None:
            self.heard.set()


class CellStream:
    """`sys.stdout`/`sys.stderr` of the kernel: text tagged with the current cell id, merged by the writer."""

    encoding = "utf-8"
    errors = "surrogateescape"

    def __init__(self, writer: FrameWriter, name: str, fd: int) -> None:
        self._writer = writer
        self._name = name
        self._fd = fd
        self.buffer = _BinaryStream(self)

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._writer.stream(self._name, CELL_ID.get(), text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Output is flushed by time and size; a flush here would defeat merging."""

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return False

    @property
    def name(self) -> str:
        return f"<{self._name}>"


class _BinaryStream:
    """`sys.stdout.buffer`: bytes decoded with surrogateescape, so every byte reaches the host as written."""

    def __init__(self, text: CellStream) -> None:
        self._text = text

    def write(self, data: bytes) -> int:
        self._text.write(bytes(data).decode("utf-8", "surrogateescape"))
        return len(data)

    def flush(self) -> None:
        """Nothing to flush (see CellStream.flush)."""


class Kernel:
    """One kernel process: protocol fds, the frame writer, the namespace, the cell worker, the call lane.

    `names` are in every cell's namespace from the start (the cell API: `display`, `bash`, `rlm`...)."""

    def __init__(self, names: dict[str, Any] | None = None) -> None:
        global PROTOCOL_FD
        self.main_ident = threading.get_ident()
        self.in_fd = os.dup(0)
        self.proto_fd = os.dup(1)
        self.diag_fd = os.dup(2)
        PROTOCOL_FD = self.proto_fd
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        self.writer = FrameWriter(self.proto_fd, self._host_gone)
        self.writer.after_protected = self._redeliver_interrupt
        self.pump_fds: list[int] = []
        # Per pipe: bytes the pump took from it, and bytes it has sent on as frames. Reads happen under the lock,
        # so (taken + still in the pipe) is an exact count of what was written to fd 1/2 so far.
        self.pump_taken: dict[int, int] = {}
        self.pump_sent: dict[int, int] = {}
        self.pumps_lock = threading.Lock()
        for fd, name in ((1, "stdout"), (2, "stderr")):
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            self.pump_fds.append(read_end)
            self.pump_taken[read_end] = self.pump_sent[read_end] = 0
            threading.Thread(target=self._pump, args=(read_end, name), name=f"eukhe-pump-{name}", daemon=True).start()
        sys.stdout = CellStream(self.writer, "stdout", 1)
        sys.stderr = CellStream(self.writer, "stderr", 2)
        self.state_lock = threading.Lock()
        self.running: Cell | None = None
        self.queued: set[str] = set()
        self.cancelled: set[str] = set()
        self.host_pending: dict[str, concurrent.futures.Future[Any]] = {}
        self.host_counter = 0
        self.children: dict[int, subprocess.Popen[Any]] = {}
        self.shutting_down = False
        self.pth_read: set[tuple[str, str]] = set()  # the `.pth` files of the host's site dirs read so far
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.requests = RequestReader(self.in_fd, self.loop, self._serve_line, self._on_eof)
        self.calls = CallLane(self.loop, self.writer, self.diag, CELL_ID)
        self.namespace = self._main_module({"__name__": "__main__", "__builtins__": __builtins__, **(names or {})})
        pictures.install(self.show_figures)

    @staticmethod
    def _main_module(names: dict[str, Any]) -> dict[str, Any]:
        """Cells run in the namespace of a fresh `__main__` module (pickle and dataclasses look it up)."""
        module = types.ModuleType("__main__")
        module.__dict__.update(names)
        sys.modules["__main__"] = module
        return module.__dict__

    # ---- start and stop ---------------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until shutdown: handshake, reader and owner threads, the cell worker on the loop. From here on this
        is the process's running kernel (`running_kernel`)."""
        global _RUNNING
        if _RUNNING is not None:
            raise RuntimeError("this process already runs a kernel")
        _RUNNING = self
        # The reader thread must get the GIL from a busy cell quickly to serve an interrupt: 5 ms by default.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        signal.signal(signal.SIGINT, self._on_sigint)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        asyncio.set_event_loop(self.loop)
        self.requests.start()
        if os.environ.get("EUKHE_KERNEL_OWNER") == "stdin":
            # A wrapped kernel: it leads its own process group, and its owner is stdin (EOF: shut down).
            with contextlib.suppress(OSError):
                os.setpgid(0, 0)
        owner = os.environ.get("EUKHE_KERNEL_OWNER_PID", "")
        if owner.isdigit():
            threading.Thread(target=self._watch_owner, args=(int(owner),), name="eukhe-owner", daemon=True).start()
        self.writer.frame(
            encode_frame(
                "ready",
                None,
                {"protocol": PROTOCOL_VERSION, "pid": os.getpid(), "python": sys.version.split()[0], "lib": venv_lib()},
            )
        )
        # After `ready` (a large snapshot must not look like a start that hangs), before the first cell runs: the
        # requests that come meanwhile wait on the loop, which starts below.
        restored = self._restore_snapshot()
        if restored:
            self.diag(restored)
        threading.Thread(target=_load_libc, name="eukhe-libc", daemon=True).start()
        self.loop.run_until_complete(self._worker())

    def _restore_snapshot(self) -> str | None:
        """Load the namespace snapshot an earlier kernel of the session left (idle culling); what to tell the host."""
        path = os.environ.get(snapshot.SNAPSHOT_VARIABLE)
        if not path:
            return None
        try:
            found = snapshot.restore(self.namespace, path)
        except OSError as exc:
            return f"the namespace snapshot {path} could not be read: {exc}"
        if found is None:
            return None
        restored, failed = found
        note = f"namespace snapshot restored: {', '.join(restored) or 'no variable'}"
        return note + (f"; not restored (they do not load here): {', '.join(failed)}" if failed else "")

    def _save_snapshot(self) -> None:
        """Write the namespace snapshot for the session's next kernel, and tell the host what it holds."""
        path = os.environ.get(snapshot.SNAPSHOT_VARIABLE)
        if not path:
            self.diag("the host asked for a namespace snapshot, but this kernel has no snapshot file")
            return
        try:
            saved, skipped = snapshot.save(self.namespace, path)
        except Exception as exc:  # a full disk, a gone directory: the kernel still stops
            self.diag(f"the namespace snapshot {path} could not be written: {type(exc).__name__}: {exc}")
            return
        note = f"namespace snapshot saved: {', '.join(saved) or 'no variable'}"
        if skipped:
            note += f"; not kept (functions, classes, values that do not pickle): {', '.join(skipped)}"
        self.diag(note)

    def shutdown(self, request_id: str | None, code: int = 0, *, take_snapshot: bool = False) -> None:
        """Kill the process groups of `bash()` children, send what is pending, write the namespace snapshot when
        asked, answer, exit (any thread)."""
        self.shutting_down = True
        self._kill_children()
        self._drain_pumps()
        if take_snapshot:
            self._save_snapshot()
        if request_id is not None:
            self.writer.frame(encode_frame("done", request_id, {"status": "ok"}))
        else:
            self.writer.flush()
        os._exit(code)

    def _kill_children(self) -> None:
        """Kill the process group of every `bash()` child (their pids are their group ids)."""
        for pgid in list(self.children):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)

    def child_started(self, process: subprocess.Popen[Any]) -> None:
        """A `bash()` child runs in its own process group: remember it, and tell the host, which reaps it if the
        stub dies before it can (S3 sandbox 8)."""
        self.children[process.pid] = process
        self.writer.frame(encode_frame("process", None, {"pgid": process.pid, "state": "started"}))

    def child_ended(self, process: subprocess.Popen[Any]) -> None:
        """A `bash()` child was waited for: its group is no longer ours to kill."""
        if self.children.pop(process.pid, None) is not None:
            self.writer.frame(encode_frame("process", None, {"pgid": process.pid, "state": "ended"}))

    def _host_gone(self) -> None:
        self._kill_children()
        os._exit(0)

    def _watch_owner(self, pid: int) -> None:
        """Local transport: exit when the host process dies (S3 sandbox 7)."""
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            pidfd = -1
        if pidfd >= 0:
            select.select([pidfd], [], [])
        else:
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
                time.sleep(0.5)
        self.diag("the host process is gone; the kernel exits")
        self.shutdown(None)

    def diag(self, message: str) -> None:
        """A kernel diagnostic: a frame for the host, which logs it."""
        self.writer.frame(encode_frame("diagnostic", None, {"message": message}))

    # ---- output -------------------------------------------------------------------------------------------

    def _pump(self, fd: int, name: str) -> None:
        """Read raw fd 1/2 output (C code, subprocesses) and send it untagged."""
        decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        while True:
            try:
                select.select([fd], [], [])  # wait outside the lock; the read below does not block
                with self.pumps_lock:
                    data = os.read(fd, 65536)
                    self.pump_taken[fd] += len(data)
            except OSError:
                return
            if not data:
                return
            try:
                self.writer.stream(name, None, decoder.decode(data))
            finally:
                with self.pumps_lock:
                    self.pump_sent[fd] += len(data)

    def _drain_pumps(self, stall: float = 5.0) -> None:
        """Wait until every byte already written to fd 1/2 went out as a frame, so it precedes `done`.

        Bytes written after this call starts (a background thread or process) are not waited for. The wait only
        gives up if the pumps make no progress for `stall` seconds (a host that stopped reading)."""
        if not _LIBC_LOADED.is_set():
            _LIBC_LOADED.wait(0.2)
        if _LIBC is not None:
            _LIBC.fflush(None)  # C stdio buffers of extension modules
        buf = bytearray(4)
        with self.pumps_lock:
            targets = []
            for fd in self.pump_fds:
                fcntl.ioctl(fd, termios.FIONREAD, buf)
                targets.append((fd, self.pump_taken[fd] + int.from_bytes(buf, sys.byteorder)))
            if all(self.pump_sent[fd] >= target for fd, target in targets):
                return  # the common case: the pumps sent everything already
        progress = -1
        deadline = time.monotonic() + stall
        while True:
            with self.pumps_lock:
                sent = dict(self.pump_sent)
            if all(sent[fd] >= target for fd, target in targets):
                return
            if sum(sent.values()) != progress:
                progress = sum(sent.values())
                deadline = time.monotonic() + stall
            elif time.monotonic() > deadline:
                self.diag(f"raw output still pending after {stall:.0f} s without progress; `done` goes out first")
                return
            time.sleep(0.0002)

    # ---- requests -----------------------------------------------------------------------------------------

    def on_main_thread(self) -> bool:
        """Whether the caller runs on the main thread (the loop's, and every synchronous cell's)."""
        return threading.get_ident() == self.main_ident

    def _serve_line(self, line: bytes) -> None:
        """One request line, from whichever side reads the input (`eukhe_kernel.requests`)."""
        try:
            message = _REQUEST_DECODER.decode(line.decode("utf-8"))
        except ValueError:  # not UTF-8 (UnicodeDecodeError is one) or not JSON
            self.diag(f"the kernel could not read a request line of {len(line)} bytes: not JSON")
            return
        if not isinstance(message, dict):
            self.diag("the kernel could not read a request: not a JSON object")
            return
        try:
            self._dispatch(message)
        except Exception as exc:
            self.diag(f"the kernel could not serve a request: {type(exc).__name__}: {exc}")

    def _on_eof(self) -> None:
        """stdin EOF = shutdown; the loop may be held by a synchronous cell, so exit from here after a grace."""
        self.shutting_down = True
        threading.Timer(EOF_GRACE_S, self.shutdown, args=(None,)).start()
        self.shutdown(None)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("request")
        request_id = message.get("id")
        if kind == "execute":
            if not isinstance(request_id, str):
                self.diag("an execute request needs a string id")
                return
            with self.state_lock:
                self.queued.add(request_id)
            if self.on_main_thread():
                self.queue.put_nowait(message)  # read by the loop itself: no wake-up through its self-pipe
            else:
                self.loop.call_soon_threadsafe(self.queue.put_nowait, message)
        elif kind == "interrupt":
            target = message.get("target")
            found = self.interrupt(target if isinstance(target, str) else None)
            if isinstance(request_id, str):
                self.writer.frame(encode_frame("done", request_id, {"status": "ok", "found": found}))
        elif kind == "host_reply":
            self._resolve_host_reply(message)
        elif kind == "shutdown":
            take_snapshot = message.get("snapshot") is True
            self.shutdown(request_id if isinstance(request_id, str) else None, take_snapshot=take_snapshot)
        elif kind == "call":
            self.calls.serve(message)  # on its own lane at once: never behind a cell (S3 @remote 3)
        else:
            self.diag(f"unknown request {kind!r}")
            if isinstance(request_id, str):
                self.writer.frame(encode_frame("done", request_id, {"status": "error", "reason": "unknown request"}))

    def interrupt(self, target: str | None) -> bool:
        """Interrupt the running cell (target None or its id), a queued one before it starts, or an `async def`
        remote call in flight (its task is cancelled)."""
        with self.state_lock:
            running = self.running
            if running is not None and (target is None or target == running.id):
                running.interrupted = True
                if running.heard is None:  # most cells are never interrupted: no event for them
                    running.heard = threading.Event()
                else:
                    running.heard.clear()
                signal.pthread_kill(self.main_ident, signal.SIGINT)
                again = functools.partial(self._interrupt_again, running, running.heard)
            elif target is not None and target in self.queued:
                self.cancelled.add(target)
                return True
            else:
                again = None
        if again is not None:  # sent again by the reader thread until heard (outside the state lock)
            self.requests.repeat(again, INTERRUPT_REPEAT_S)
            return True
        if target is not None:
            return self.calls.cancel(target)  # an `async def` remote call the host stopped waiting for
        return False

    def _resolve_host_reply(self, message: dict[str, Any]) -> None:
        """Settle the host request named by the reply; a `duplicate` reply never settles one (S3 protocol 4)."""
        request_id = message.get("id")
        status = message.get("status")
        if status == "duplicate":
            self.diag(f"the host refused a repeated host-request id {request_id!r}; the first request still waits")
            return
        future = self.host_pending.pop(request_id, None) if isinstance(request_id, str) else None
        if future is None:
            self.diag(f"a host reply for an unknown request id {request_id!r} was dropped")
            return
        if status == "ok":
            future.set_result(message.get("result"))
        else:
            error = message.get("error")
            code = str(error.get("code", "error")) if isinstance(error, dict) else "error"
            text = str(error.get("message", "")) if isinstance(error, dict) else str(error)
            details = error.get("details") if isinstance(error, dict) else None
            future.set_exception(HostRequestError(code, text, details))

    def host_request(
        self, kind: str, params: Any = None, *, request_id: str | None = None
    ) -> concurrent.futures.Future[Any]:
        """Send one host request; the future settles with the handler's reply. Payload over 16 MiB: raises first."""
        if request_id is None:
            with self.state_lock:
                self.host_counter += 1
                request_id = f"h{self.host_counter}"
        try:
            cwd: str | None = os.getcwd()
        except OSError:  # the kernel's directory was removed under it
            cwd = None
        fields = {"type": kind, "cell": CELL_ID.get(), "params": params, "cwd": cwd}
        data = encode_frame("host_request", request_id, fields)
        if len(data) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLargeError("host_request", len(data))
        future = self.host_pending.get(request_id)
        if future is None:
            future = concurrent.futures.Future()
            self.host_pending[request_id] = future
        if self.on_main_thread():
            self.requests.hand_over()  # the main thread may wait for the reply: the reader thread must read it
        self.writer.frame(data)
        return future

    def display(self, bundle: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        """Send a display frame for the current cell; over 16 MiB raises PayloadTooLargeError before writing."""
        data = encode_frame("display", CELL_ID.get(), {"data": bundle, "metadata": metadata or {}})
        if len(data) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLargeError("display", len(data))
        self.writer.frame(data)

    def show_figures(self, figures: Any) -> None:
        """Display matplotlib figures (`plt.show()`, the open ones at a cell's end) and close them; a figure whose
        display is over the payload limit is named on stderr instead."""
        for figure in figures:
            try:
                self.display(pictures.bundle_of(figure))
            except PayloadTooLargeError as exc:
                sys.stderr.write(f"[{figure!r} not shown: {exc}]\n")

    # ---- SIGINT -------------------------------------------------------------------------------------------

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        cell = self.running
        if cell is None:
            return
        cell.interrupted = True
        cell_on_stack = False
        walk = frame
        while walk is not None:
            if walk.f_code in PROTECTED_CODES:
                self.writer.interrupt_deferred = True
                cell.hear()
                return
            if walk.f_code in cell.codes:
                cell_on_stack = True
            walk = walk.f_back
        if cell_on_stack:
            cell.hear()
            raise KeyboardInterrupt
        if cell.task is not None:
            cell.hear()
            self.loop.call_soon_threadsafe(cell.task.cancel)

    def _interrupt_again(self, cell: Cell, heard: threading.Event) -> bool:
        """Send SIGINT again if the handler has not acted on it while `cell` runs; whether to go on (the reader
        thread calls this every INTERRUPT_REPEAT_S after an interrupt).

        A SIGINT that lands after the interpreter's last check for signals and before a blocking call (a
        `time.sleep` right after the line that announced the cell) wakes nothing: the handler would run only at
        the next signal. So would one that lands before the cell's code is on the stack."""
        if heard.is_set():
            return False
        with self.state_lock:
            if self.running is not cell:
                return False
            signal.pthread_kill(self.main_ident, signal.SIGINT)
        return True

    def _redeliver_interrupt(self) -> None:
        """A SIGINT arrived during a frame write: deliver it again now that the write is whole."""
        if not self.on_main_thread():
            return
        self.writer.interrupt_deferred = False
        self._on_sigint(signal.SIGINT, sys._getframe(2))  # the caller of the write (frame 1 is the write itself)

    # ---- cells --------------------------------------------------------------------------------------------

    async def _worker(self) -> None:
        self.requests.to_loop()  # the loop runs: it reads the requests while no cell runs
        while True:
            message = await self.queue.get()
            cell_id: str = message["id"]
            with self.state_lock:
                self.queued.discard(cell_id)
                skip = cell_id in self.cancelled
                self.cancelled.discard(cell_id)
                cell = Cell(cell_id)
                if not skip:
                    self.running = cell
            site_dirs = message.get("site_dirs")
            if site_dirs:  # before the cell, interrupted or not: the host counts them as added
                token = CELL_ID.set(cell_id)  # what a `.pth` file prints is the cell's
                try:
                    self._add_site_dirs(site_dirs)
                finally:
                    CELL_ID.reset(token)
            if skip:
                error = self._error_frame(cell_id, "KeyboardInterrupt", "interrupted before it started", [])
                self.writer.frame(error + encode_frame("done", cell_id, {"status": "interrupted"}))
                continue
            code = message.get("code", "")
            self.requests.cell_started()
            try:
                await self._serve_cell(cell, code if isinstance(code, str) else "")
            finally:
                self.requests.cell_ended()

    def _add_site_dirs(self, dirs: Any) -> None:
        """Put each directory the host names (a workspace venv's site-packages) at the end of `sys.path` and read its
        `.pth` files as `site` reads a venv's, each file once (an editable install's finder is set up once); then
        drop the import system's directory caches, so what was installed there since imports now."""
        import importlib  # noqa: PLC0415 - lazy on purpose: most kernels are never told of a workspace venv
        import site  # noqa: PLC0415

        for path in dirs if isinstance(dirs, list) else []:
            if not isinstance(path, str):
                continue
            if path not in sys.path:
                sys.path.append(path)
            try:
                names = sorted(name for name in os.listdir(path) if name.endswith(".pth"))
            except OSError:
                continue
            for name in names:
                if (path, name) not in self.pth_read:
                    self.pth_read.add((path, name))
                    site.addpackage(path, name, None)
        importlib.invalidate_caches()

    async def _serve_cell(self, cell: Cell, code: str) -> None:
        """Run one cell and answer it: its result or error and its `done`, after every byte it wrote."""
        token = CELL_ID.set(cell.id)  # inherited by the tasks the cell starts (and its own task)
        try:
            status = await self._run_cell(cell, code)
            self._flush_figures()
        finally:
            CELL_ID.reset(token)
        with self.state_lock:
            self.running = None
        self._drain_pumps()
        # Reading is the loop's again before the done goes out, so the host's next request wakes no thread.
        self.requests.cell_ended()
        # The result or error and the done go out in one write, after every byte the cell wrote.
        self.writer.frame(b"".join(cell.final) + encode_frame("done", cell.id, {"status": status}))

    async def _run_cell(self, cell: Cell, source: str) -> str:
        """Compile and run one cell; a cell without await runs right here, one with await as its own task."""
        try:
            body, tail = self._compile(cell, source)
            flags = (body.co_flags if body is not None else 0) | (tail.co_flags if tail is not None else 0)
            if not flags & inspect.CO_COROUTINE:
                if cell.interrupted:
                    raise KeyboardInterrupt
                if body is not None:
                    eval(body, self.namespace)
                value = eval(tail, self.namespace) if tail is not None else None
            else:
                if cell.interrupted:
                    raise KeyboardInterrupt
                task = self.loop.create_task(self._run_async(body, tail), context=contextvars.copy_context())
                cell.task = task
                await asyncio.wait([task])
                if task.cancelled():
                    raise asyncio.CancelledError
                value, error = task.result()
                if error is not None:
                    raise error
            if value is not None:
                self.namespace["_"] = value
                text = repr(value)
                if len(text) > RESULT_REPR_CHARS:
                    text = text[:RESULT_REPR_CHARS] + f"... [repr cut at {RESULT_REPR_CHARS} characters]"
                cell.final.append(self._result_frame(cell.id, value, text))
            return "ok"
        except (KeyboardInterrupt, asyncio.CancelledError) as exc:
            trace = _cell_traceback(exc, interrupted=True)
            cell.final.append(self._error_frame(cell.id, "KeyboardInterrupt", "", trace))
            return "interrupted"
        except BaseException as exc:
            cell.final.append(self._error_frame(cell.id, type(exc).__name__, _safe_str(exc), _cell_traceback(exc)))
            return "error"

    def _result_frame(self, cell_id: str, value: Any, text: str) -> bytes:
        """The result frame of a cell's last value: its repr, and its rich bundle when it has one (left out when it
        fails or is over the payload limit: the repr still shows)."""
        try:
            bundle = pictures.bundle_of(value, plain=text)
        except Exception as exc:
            self.diag(f"the rich display of the cell's value failed: {type(exc).__name__}: {_safe_str(exc)}")
            bundle = {}
        if pictures.is_rich(bundle):
            frame = encode_frame("result", cell_id, {"repr": text, "data": bundle})
            if len(frame) <= MAX_PAYLOAD_BYTES:
                return frame
            sys.stderr.write(f"[the value's rich display was not sent: {PayloadTooLargeError('result', len(frame))}]\n")
        return encode_frame("result", cell_id, {"repr": text})

    def _flush_figures(self) -> None:
        """The matplotlib figures a cell left open are displayed at its end (as a notebook does), then closed."""
        try:
            self.show_figures(pictures.open_figures())
        except Exception as exc:
            self.diag(f"the cell's open figures could not be shown: {type(exc).__name__}: {_safe_str(exc)}")

    def _compile(self, cell: Cell, source: str) -> tuple[CodeType | None, CodeType | None]:
        """The cell's statements and its trailing expression (either may be absent), compiled with top-level await."""
        filename = f"<cell-{cell.id}>"
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        if "\\" not in source:
            # Most cells are one expression: compiled from source in "eval" mode that is a third of the AST path.
            # A failed attempt fails in the parser, before any compiler warning; the tokenizer's warnings need a
            # backslash (escapes), so such a cell goes the AST way at once and no warning is given twice.
            try:
                whole = compile(source, filename, "eval", flags, dont_inherit=True)
            except SyntaxError:
                pass
            else:
                cell.codes.add(whole)
                return None, whole
        tree = compile(source, filename, "exec", flags | ast.PyCF_ONLY_AST, dont_inherit=True)
        assert isinstance(tree, ast.Module)
        tail: ast.Expression | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body.pop()
            assert isinstance(last, ast.Expr)
            tail = ast.Expression(last.value)
        body = compile(tree, filename, "exec", flags, dont_inherit=True) if tree.body else None
        if body is not None:
            cell.codes.add(body)
        tail_code = compile(tail, filename, "eval", flags, dont_inherit=True) if tail is not None else None
        if tail_code is not None:
            cell.codes.add(tail_code)
        return body, tail_code

    async def _run_async(self, body: CodeType | None, tail: CodeType | None) -> tuple[Any, BaseException | None]:
        """The cell's own task; every exception comes back as a value (a KeyboardInterrupt must not leave a task)."""
        try:
            if body is not None:
                outcome = eval(body, self.namespace)
                if body.co_flags & inspect.CO_COROUTINE:
                    await outcome
            value = None
            if tail is not None:
                value = eval(tail, self.namespace)
                if tail.co_flags & inspect.CO_COROUTINE:
                    value = await value
            return value, None
        except BaseException as exc:
            return None, exc

    def _error_frame(self, cell_id: str, ename: str, evalue: str, trace: list[str]) -> bytes:
        return encode_frame("error", cell_id, {"ename": ename, "evalue": evalue[:TRACEBACK_CHARS], "traceback": trace})


def venv_lib() -> str:
    """The directory a venv of this Python has under `lib/`: `python3.11`, `python3.13t` when free-threaded."""
    kind = "pypy" if sys.implementation.name == "pypy" else "python"
    threaded = "t" if "t" in getattr(sys, "abiflags", "") else ""
    return f"{kind}{sys.version_info[0]}.{sys.version_info[1]}{threaded}"


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"


_KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))
_ASYNCIO_DIR = os.path.dirname(os.path.abspath(asyncio.__file__))


def _cell_traceback(exc: BaseException, interrupted: bool = False) -> list[str]:
    """The traceback of the cell's frames: from the first cell frame on, without the kernel's or asyncio's frames."""
    try:
        tb = exc.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            tb = tb.tb_next
        if isinstance(exc, SyntaxError) or tb is None:
            lines = traceback.format_exception_only(type(exc), exc)
        else:
            entries = [
                entry
                for entry in traceback.extract_tb(tb)
                if not entry.filename.startswith((_KERNEL_DIR, _ASYNCIO_DIR))
            ]
            lines = ["Traceback (most recent call last):\n", *traceback.format_list(entries)]
            if interrupted:
                lines.append("KeyboardInterrupt\n")
            else:
                lines.extend(traceback.format_exception_only(type(exc), exc))
    except Exception:
        lines = [f"{type(exc).__name__}: {_safe_str(exc)}\n"]
    out: list[str] = []
    size = 0
    for line in lines:
        size += len(line)
        if size > TRACEBACK_CHARS:
            out.append("... [traceback cut]\n")
            break
        out.append(line)
    return out
