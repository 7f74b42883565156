"""`rlm.remote`: a kernel function the host offers as a tool (spec S3 "@remote" 1, 3-5).

    @rlm.remote
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

The decorator offers the function to this kernel's call lane (by name; a second offer of a name replaces the first)
and announces it with host request `remote.register`: its name, module, qualified name, docstring, and
the JSON Schema of its keyword arguments, derived from its type hints by msgspec (imported here, lazily: the rest
of the stub needs the standard library only). A parameter that cannot be given by keyword (positional-only, *args)
is refused at decoration: a call gives every argument by keyword.

A call of it is served by the kernel's call lane (`eukhe_kernel.calls`, which documents a call's `done` frame and its
errors): beside the cells, never behind one.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eukhe_kernel.api import host_request_sync, running_kernel

__all__ = ["Remote", "describe", "remote"]

REGISTER = "remote.register"
"""The host request that announces a function."""

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
"""A remote function's name: the host offers it as tool `remote/<name>`."""

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
    running_kernel().calls.offer(entry, lambda: host_request_sync(REGISTER, entry.register_params()))
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
