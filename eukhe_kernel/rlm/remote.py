"""`rlm.remote`: a kernel function the host offers as a tool (spec S3 "@remote" 1, 3-5).

    @rlm.remote
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

The decorator records the function in this kernel (`REMOTES`, by name; a second registration of a name replaces
the first) and announces it with host request `remote.register`: its name, module, qualified name, docstring, and
the JSON Schema of its keyword arguments, derived from its type hints by msgspec (imported here, lazily: the rest
of the stub needs the standard library only). A parameter that cannot be given by keyword (positional-only, *args)
is refused at decoration: a call gives every argument by keyword.

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
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import re
import threading
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eukhe_kernel.protocol import MAX_PAYLOAD_BYTES, PayloadTooLargeError, encode_frame
from eukhe_kernel.runtime import CELL_ID, Kernel

__all__ = ["REMOTES", "Remote", "cancel", "remote", "serve_call"]

REGISTER = "remote.register"
"""The host request that announces a function."""

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
"""A remote function's name: the host offers it as tool `remote/<name>`."""

MESSAGE_CHARS = 256 * 1024
"""An error message is cut to this many characters (the host bounds it again by the session's limits)."""

_STRICT = json.JSONEncoder(allow_nan=False)
_ANY: Any = typing.Any


@dataclass(frozen=True, slots=True)
class Remote:
    """A registered function: what the host was told of it, and how to call it."""

    name: str
    function: Callable[..., Any]
    module: str
    qualname: str
    doc: str | None
    schema: dict[str, Any]
    hints: dict[str, Any]
    """Each parameter's type hint (and the `**kwargs` one under `extra`): a call's arguments are converted to them."""
    extra: Any
    """The `**kwargs` parameter's hint, or None when the function takes no `**kwargs`."""
    is_async: bool

    def register_params(self) -> dict[str, Any]:
        """The `remote.register` request's params."""
        return {
            "name": self.name,
            "module": self.module,
            "qualname": self.qualname,
            "doc": self.doc,
            "schema": self.schema,
        }

    def arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments converted to the type hints by msgspec; a value that does not fit is a TypeError
        naming the parameter. Names the function does not take are passed on: the call's own TypeError says so."""
        msgspec = _msgspec()
        converted: dict[str, Any] = {}
        for key, value in args.items():
            hint = self.hints.get(key, self.extra)
            if hint is None or hint is _ANY:
                converted[key] = value
                continue
            try:
                converted[key] = msgspec.convert(value, hint)
            except msgspec.ValidationError as error:
                raise TypeError(f"{self.qualname}() argument {key!r}: {error}") from None
        return converted


REMOTES: dict[str, Remote] = {}
"""The functions this kernel offers, by name."""

_TASKS: dict[str, asyncio.Task[None] | None] = {}
"""The `async def` calls in flight, by call id (None: its task is not made yet); an interrupt naming one cancels it."""
_CANCELLED: set[str] = set()
"""`async def` calls an interrupt named before their task was made: they answer `cancelled` without running."""
_TASKS_LOCK = threading.Lock()


# ---- the decorator ------------------------------------------------------------------------------------------------


@typing.overload
def remote(function: Callable[..., Any], /, *, name: str | None = None) -> Callable[..., Any]: ...
@typing.overload
def remote(function: None = None, /, *, name: str | None = None) -> Callable[[Callable[..., Any]], Any]: ...
def remote(function: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Offer `function` to the host as tool `remote/<name>` (default name: the function's own). Use it as
    `@rlm.remote` or `@rlm.remote(name="other")`; it returns the function unchanged."""
    if function is None:
        return lambda inner: remote(inner, name=name)
    if isinstance(function, str):
        raise TypeError(f"@rlm.remote takes the name by keyword: @rlm.remote(name={function!r})")
    entry = describe(function, name)
    from eukhe_kernel.api import host_request_sync  # noqa: PLC0415 - api imports the runtime, which imports rlm

    previous = REMOTES.get(entry.name)
    REMOTES[entry.name] = entry  # first here, so a call that comes as soon as the host knows it finds it
    try:
        host_request_sync(REGISTER, entry.register_params())
    except BaseException:
        if REMOTES.get(entry.name) is entry:
            if previous is None:
                del REMOTES[entry.name]
            else:
                REMOTES[entry.name] = previous
        raise
    return function


def describe(function: Callable[..., Any], name: str | None = None) -> Remote:
    """A function as a remote function: its name, schema and hints; a TypeError (or ValueError for the name) says
    why it cannot be one."""
    if not callable(function):
        raise TypeError(f"@rlm.remote needs a function, not {type(function).__name__}")
    qualname = str(getattr(function, "__qualname__", getattr(function, "__name__", type(function).__name__)))
    name = name if name is not None else str(getattr(function, "__name__", qualname))
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(
            f"@rlm.remote: {name!r} cannot name a tool: a letter or _, then letters, digits, _ . - (64 at most)"
        )
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as error:
        raise TypeError(f"@rlm.remote: {qualname}() has no signature to offer: {error}") from None
    what = f"@rlm.remote: {qualname}() cannot be a remote function"
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{what}: its parameter {parameter.name!r} is positional-only, and a call gives every argument by "
                f"keyword (drop the `/`)"
            )
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"{what}: its parameter *{parameter.name} takes positional arguments, and a call gives every "
                f"argument by keyword"
            )
    try:
        resolved = typing.get_type_hints(function, include_extras=True)
    except Exception as error:
        raise TypeError(f"{what}: its type hints do not resolve ({type(error).__name__}: {error})") from None
    hints: dict[str, Any] = {}
    extra: Any = None
    for parameter in signature.parameters.values():
        hint = resolved.get(parameter.name, _ANY)
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            extra = hint
        else:
            hints[parameter.name] = hint
    schema = _schema(name, signature, hints, extra, what)
    module = str(getattr(function, "__module__", None) or "__main__")
    return Remote(
        name=name,
        function=function,
        module=module,
        qualname=qualname,
        doc=inspect.getdoc(function),
        schema=schema,
        hints=hints,
        extra=extra,
        is_async=inspect.iscoroutinefunction(function),
    )


def _msgspec() -> types.ModuleType:
    """msgspec, which derives the schemas and converts the arguments; a clear error when the kernel has none."""
    try:
        import msgspec  # noqa: PLC0415 - lazy on purpose: the stub starts with the standard library alone
    except ImportError:
        raise ImportError(
            "@rlm.remote needs msgspec in the kernel's Python: it derives the JSON Schema of a function's "
            "arguments from its type hints. The installed kernel has it (`eukhe kernel install`); under "
            "EUKHE_KERNEL_PYTHON or a wrapped transport, install msgspec into that Python."
        ) from None
    return msgspec


def _schema(name: str, signature: inspect.Signature, hints: dict[str, Any], extra: Any, what: str) -> dict[str, Any]:
    """The JSON Schema of the keyword arguments: each parameter's schema from msgspec, the defaults strict JSON
    can carry, the required ones, and `**kwargs` as `additionalProperties`."""
    msgspec = _msgspec()
    names = list(hints)
    labels = names if extra is None else [*names, "**kwargs"]
    kinds = [hints[key] for key in names] + ([] if extra is None else [extra])
    for key, kind in zip(labels, kinds, strict=True):
        try:
            msgspec.json.schema(kind)
        except (TypeError, ValueError) as error:
            first = str(error).strip().splitlines()[-1]
            raise TypeError(
                f"{what}: msgspec cannot give a JSON Schema of parameter {key!r} ({first}); a call's arguments "
                f"come as JSON"
            ) from None
    schemas, defs = msgspec.json.schema_components(kinds, ref_template="#/$defs/{name}")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, part in zip(names, schemas, strict=False):
        parameter = signature.parameters[key]
        entry = dict(part)
        if parameter.default is inspect.Parameter.empty:
            required.append(key)
        elif _is_strict_json(parameter.default):
            entry["default"] = parameter.default
        properties[key] = entry
    schema: dict[str, Any] = {"title": name, "type": "object", "properties": properties, "required": required}
    schema["additionalProperties"] = False if extra is None else schemas[-1]
    if defs:
        schema["$defs"] = defs
    return schema


def _is_strict_json(value: Any) -> bool:
    try:
        _STRICT.encode(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


# ---- the call lane (the reader thread starts each call) -----------------------------------------------------------


def serve_call(kernel: Kernel, message: dict[str, Any]) -> None:
    """Start one `call` request at once (on the reader thread): a sync function on its own daemon thread, an
    `async def` as a task on the kernel's loop. Never waits for a cell."""
    call_id = message.get("id")
    if not isinstance(call_id, str):
        kernel.diag("a call request needs a string id")
        return
    name, module, function, args = (message.get(key) for key in ("name", "module", "function", "args"))
    entry = REMOTES.get(name) if isinstance(name, str) else None
    if entry is None or (entry.module, entry.qualname) != (module, function):
        _fail(kernel, call_id, "unknown", f"no remote function {name!r} ({module}.{function}) in this kernel")
        return
    if not isinstance(args, dict):
        _fail(kernel, call_id, "bad_arguments", "TypeError: a call's args must be a JSON object")
        return
    context = contextvars.copy_context()
    context.run(CELL_ID.set, call_id)  # what the function prints is the call's, not the running cell's
    if entry.is_async:
        with _TASKS_LOCK:
            _TASKS[call_id] = None  # an interrupt that comes before the task is made still finds the call
        kernel.loop.call_soon_threadsafe(_start_task, kernel, entry, call_id, args, context)
    else:
        threading.Thread(
            target=context.run,
            args=(_run_sync, kernel, entry, call_id, args),
            name=f"eukhe-remote-{call_id}",
            daemon=True,
        ).start()


def cancel(kernel: Kernel, call_id: str) -> bool:
    """Cancel an `async def` call in flight (an interrupt naming it); a sync call's thread cannot be stopped."""
    with _TASKS_LOCK:
        if call_id not in _TASKS:
            return False
        task = _TASKS[call_id]
        if task is None:
            _CANCELLED.add(call_id)
            return True
    kernel.loop.call_soon_threadsafe(task.cancel)
    return True


def _run_sync(kernel: Kernel, entry: Remote, call_id: str, args: dict[str, Any]) -> None:
    try:
        value = entry.function(**entry.arguments(args))
    except BaseException as error:  # SystemExit too: a remote function never ends the kernel
        _raised(kernel, call_id, error)
        return
    _answer(kernel, call_id, value)


def _start_task(
    kernel: Kernel, entry: Remote, call_id: str, args: dict[str, Any], context: contextvars.Context
) -> None:
    with _TASKS_LOCK:
        cancelled = call_id in _CANCELLED
        _CANCELLED.discard(call_id)
        if cancelled:
            del _TASKS[call_id]
        else:
            task = kernel.loop.create_task(_run_async(kernel, entry, call_id, args), context=context)
            _TASKS[call_id] = task
    if cancelled:
        _fail(kernel, call_id, "cancelled", "the call was cancelled before it started")
        return
    task.add_done_callback(lambda ended: _forget(kernel, call_id, ended))


def _forget(kernel: Kernel, call_id: str, task: asyncio.Task[None]) -> None:
    """The call's task ended. One cancelled before its first step never ran `_run_async`: its `done` is sent here."""
    with _TASKS_LOCK:
        _TASKS.pop(call_id, None)
    if task.cancelled():
        _fail(kernel, call_id, "cancelled", "the call was cancelled before it started")


async def _run_async(kernel: Kernel, entry: Remote, call_id: str, args: dict[str, Any]) -> None:
    try:
        value = await entry.function(**entry.arguments(args))
    except asyncio.CancelledError:
        _fail(kernel, call_id, "cancelled", "the call was cancelled (its host stopped waiting for it)")
        return
    except BaseException as error:
        _raised(kernel, call_id, error)
        return
    _answer(kernel, call_id, value)


def _raised(kernel: Kernel, call_id: str, error: BaseException) -> None:
    """A TypeError raised by the call itself (the arguments did not bind; no frame of the function ran) or by the
    conversion is `bad_arguments`; any other exception is `raised`."""
    trace = error.__traceback__
    at_the_call = isinstance(error, TypeError) and (
        trace is None or trace.tb_next is None or trace.tb_next.tb_frame.f_code is Remote.arguments.__code__
    )
    _fail(kernel, call_id, "bad_arguments" if at_the_call else "raised", f"{type(error).__name__}: {_text(error)}")


def _answer(kernel: Kernel, call_id: str, value: Any) -> None:
    """The result's `done` frame; one strict JSON cannot carry (NaN, Infinity, a set...) or too large is an error
    frame instead, and the kernel goes on."""
    try:
        frame = encode_frame("done", call_id, {"status": "ok", "result": value})
    except ValueError as error:
        message = f"the result holds NaN or Infinity, which strict JSON cannot carry ({error})"
        _fail(kernel, call_id, "unencodable", message)
        return
    except (TypeError, RecursionError) as error:
        _fail(kernel, call_id, "unencodable", f"the result is not JSON: {type(error).__name__}: {error}")
        return
    if len(frame) > MAX_PAYLOAD_BYTES:
        _fail(kernel, call_id, "over_limit", str(PayloadTooLargeError("result", len(frame))))
        return
    kernel.writer.frame(frame)


def _fail(kernel: Kernel, call_id: str, reason: str, message: str) -> None:
    fields = {"status": "error", "reason": reason, "message": message[:MESSAGE_CHARS]}
    kernel.writer.frame(encode_frame("done", call_id, fields))


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return f"<unprintable {type(error).__name__}>"
