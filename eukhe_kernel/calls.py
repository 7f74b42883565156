"""The kernel's call lane (spec S3 "@remote" 3-5): the functions a kernel offers, and the `call` requests it serves.

A `call` request (`id`, `name`, `module`, `function`, `args`) is served on a lane of its own, never behind a cell
nor holding one back: the reader thread (the owner of the protocol's stdin) starts it at once. A synchronous
function runs on its own daemon thread (one that hangs costs that thread, nothing else); an `async def` runs as a
task on the kernel's loop (one that blocks without `await` stops the whole kernel). Its `done` frame carries the
result, or `status` `error` with a `reason` and a `message`:

| reason | when |
| --- | --- |
| `unknown` | no function of that name, module and qualified name is registered here |
| `bad_arguments` | the arguments do not fit the function: its `TypeError` text (or the type hints' refusal) |
| `raised` | the function raised: the exception's type and message |
| `unencodable` | the result is not strict JSON (NaN, Infinity, a type JSON has not): the frame stays valid JSON |
| `over_limit` | the result's frame would pass the protocol's 16 MiB payload limit |
| `cancelled` | an `async def` call was cancelled (the host's bound passed and it sent an interrupt naming the call) |

What a remote function prints is tagged with the call's id (not a cell's): the host keeps it as background output.
The lane belongs to the kernel (`Kernel.calls`); `@rlm.remote` offers functions to it (`eukhe_kernel.rlm.remote`).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol

from eukhe_kernel.frames import FrameWriter
from eukhe_kernel.protocol import MAX_PAYLOAD_BYTES, PayloadTooLargeError, encode_frame

__all__ = ["MESSAGE_CHARS", "CallLane", "Callee"]

MESSAGE_CHARS = 256 * 1024
"""An error message is cut to this many characters (the host bounds it again by the session's limits)."""


class Callee(Protocol):
    """What the lane needs of an offered function: its name as the host knows it, and how to call it."""

    @property
    def name(self) -> str: ...
    @property
    def module(self) -> str: ...
    @property
    def qualname(self) -> str: ...
    @property
    def function(self) -> Callable[..., Any]: ...
    @property
    def is_async(self) -> bool: ...

    def arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments as the function takes them; a TypeError says which one does not fit."""
        ...


class CallLane:
    """One kernel's offered functions (by name; a second offer of a name replaces the first) and its calls in
    flight. `serve` and `cancel` run on the reader thread; the calls on their own threads or the kernel's loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        writer: FrameWriter,
        diag: Callable[[str], None],
        tag: contextvars.ContextVar[str | None],
    ) -> None:
        self._loop = loop
        self._writer = writer
        self._diag = diag
        self._tag = tag
        self._offered: dict[str, Callee] = {}
        self._lock = threading.Lock()
        self._tasks: dict[str, asyncio.Task[None] | None] = {}
        """The `async def` calls in flight, by call id (None: its task is not made yet)."""
        self._cancelled: set[str] = set()
        """`async def` calls an interrupt named before their task was made: they answer `cancelled` unrun."""

    # ---- the offered functions ------------------------------------------------------------------------

    def offer(self, entry: Callee, announce: Callable[[], object]) -> None:
        """Offer `entry`, then `announce` it to the host; an announcement that raises takes the offer back (the
        function the name offered before, if any, is offered again). Recorded first, so a call that comes as soon
        as the host knows it finds it."""
        with self._lock:
            previous = self._offered.get(entry.name)
            self._offered[entry.name] = entry
        try:
            announce()
        except BaseException:
            with self._lock:
                if self._offered.get(entry.name) is entry:
                    if previous is None:
                        del self._offered[entry.name]
                    else:
                        self._offered[entry.name] = previous
            raise

    def offered(self, name: str) -> Callee | None:
        """The function offered under `name`, if any."""
        with self._lock:
            return self._offered.get(name)

    # ---- calls (the reader thread starts each one) ----------------------------------------------------

    def serve(self, message: dict[str, Any]) -> None:
        """Start one `call` request at once: a sync function on its own daemon thread, an `async def` as a task
        on the kernel's loop. Never waits for a cell."""
        call_id = message.get("id")
        if not isinstance(call_id, str):
            self._diag("a call request needs a string id")
            return
        name, module, function, args = (message.get(key) for key in ("name", "module", "function", "args"))
        entry = self.offered(name) if isinstance(name, str) else None
        if entry is None or (entry.module, entry.qualname) != (module, function):
            self._fail(call_id, "unknown", f"no remote function {name!r} ({module}.{function}) in this kernel")
            return
        if not isinstance(args, dict):
            self._fail(call_id, "bad_arguments", "TypeError: a call's args must be a JSON object")
            return
        context = contextvars.copy_context()
        context.run(self._tag.set, call_id)  # what the function prints is the call's, not the running cell's
        if entry.is_async:
            with self._lock:
                self._tasks[call_id] = None  # an interrupt that comes before the task is made still finds it
            self._loop.call_soon_threadsafe(self._start_task, entry, call_id, args, context)
        else:
            threading.Thread(
                target=context.run,
                args=(self._run_sync, entry, call_id, args),
                name=f"eukhe-remote-{call_id}",
                daemon=True,
            ).start()

    def cancel(self, call_id: str) -> bool:
        """Cancel an `async def` call in flight (an interrupt naming it); a sync call's thread cannot be stopped."""
        with self._lock:
            if call_id not in self._tasks:
                return False
            task = self._tasks[call_id]
            if task is None:
                self._cancelled.add(call_id)
                return True
        self._loop.call_soon_threadsafe(task.cancel)
        return True

    def _run_sync(self, entry: Callee, call_id: str, args: dict[str, Any]) -> None:
        kwargs = self._arguments(entry, call_id, args)
        if kwargs is None:
            return
        try:
            value = entry.function(**kwargs)
        except BaseException as error:  # SystemExit too: a remote function never ends the kernel
            self._raised(call_id, error)
            return
        self._answer(call_id, value)

    def _start_task(self, entry: Callee, call_id: str, args: dict[str, Any], context: contextvars.Context) -> None:
        with self._lock:
            cancelled = call_id in self._cancelled
            self._cancelled.discard(call_id)
            if cancelled:
                del self._tasks[call_id]
            else:
                task = self._loop.create_task(self._run_async(entry, call_id, args), context=context)
                self._tasks[call_id] = task
        if cancelled:
            self._fail(call_id, "cancelled", "the call was cancelled before it started")
            return
        task.add_done_callback(lambda ended: self._forget(call_id, ended))

    def _forget(self, call_id: str, task: asyncio.Task[None]) -> None:
        """The call's task ended. One cancelled before its first step never ran `_run_async`: its `done` is here."""
        with self._lock:
            self._tasks.pop(call_id, None)
        if task.cancelled():
            self._fail(call_id, "cancelled", "the call was cancelled before it started")

    async def _run_async(self, entry: Callee, call_id: str, args: dict[str, Any]) -> None:
        try:
            kwargs = self._arguments(entry, call_id, args)
            if kwargs is None:
                return
            value = await entry.function(**kwargs)
        except asyncio.CancelledError:
            self._fail(call_id, "cancelled", "the call was cancelled (its host stopped waiting for it)")
            return
        except BaseException as error:
            self._raised(call_id, error)
            return
        self._answer(call_id, value)

    def _arguments(self, entry: Callee, call_id: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """The converted arguments, or None when the conversion refused them (its `done` is sent here)."""
        try:
            return entry.arguments(args)
        except TypeError as error:
            self._fail(call_id, "bad_arguments", f"{type(error).__name__}: {_text(error)}")
        except BaseException as error:  # as a call's own exception: a remote function never ends the kernel
            self._fail(call_id, "raised", f"{type(error).__name__}: {_text(error)}")
        return None

    def _raised(self, call_id: str, error: BaseException) -> None:
        """A TypeError raised by the call itself (the arguments did not bind; no frame of the function ran) is
        `bad_arguments`; any other exception is `raised`."""
        trace = error.__traceback__
        at_the_call = isinstance(error, TypeError) and (trace is None or trace.tb_next is None)
        reason = "bad_arguments" if at_the_call else "raised"
        self._fail(call_id, reason, f"{type(error).__name__}: {_text(error)}")

    def _answer(self, call_id: str, value: Any) -> None:
        """The result's `done` frame; one strict JSON cannot carry (NaN, Infinity, a set...) or too large is an
        error frame instead, and the kernel goes on."""
        try:
            frame = encode_frame("done", call_id, {"status": "ok", "result": value})
        except ValueError as error:
            message = f"the result holds NaN or Infinity, which strict JSON cannot carry ({error})"
            self._fail(call_id, "unencodable", message)
            return
        except (TypeError, RecursionError) as error:
            self._fail(call_id, "unencodable", f"the result is not JSON: {type(error).__name__}: {error}")
            return
        if len(frame) > MAX_PAYLOAD_BYTES:
            self._fail(call_id, "over_limit", str(PayloadTooLargeError("result", len(frame))))
            return
        self._writer.frame(frame)

    def _fail(self, call_id: str, reason: str, message: str) -> None:
        fields = {"status": "error", "reason": reason, "message": message[:MESSAGE_CHARS]}
        self._writer.frame(encode_frame("done", call_id, fields))


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return f"<unprintable {type(error).__name__}>"
