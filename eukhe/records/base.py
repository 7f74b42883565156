"""The base of every record, and strict decoding that names the field it refuses.

A record is a frozen `msgspec.Struct` that forbids unknown fields, with keyword-only snake_case fields. Decoding is
strict: an unknown field, a missing required one or a wrong type raises `InputError` whose `field` is the dotted path
(`args.budget_ms`), whose `expected` says what would do, and which hints a known spelling (`budgetMs` -> `budget_ms`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator
from typing import Any, TypeVar, dataclass_transform, overload

import msgspec

from eukhe.errors import InputError


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(msgspec.field,))
class _RecordMeta(msgspec.StructMeta):
    """Every record's fields are keyword-only (msgspec applies `kw_only` per class; this gives it to each)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **options: Any) -> Any:
        options.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **options)


class Record(msgspec.Struct, metaclass=_RecordMeta, frozen=True, forbid_unknown_fields=True):
    """A typed value that crosses a boundary (a request, an answer, a setting, a journal record)."""

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON values (snake_case keys; tuples become lists, as JSON has them)."""
        value = msgspec.json.decode(_ENCODER.encode(self))
        assert isinstance(value, dict)
        return value


T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()
_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`")
_EXPECTED = re.compile(r"^Expected (?P<expected>.+?)(?:, got `(?P<got>[^`]*)`)?$")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def encode(value: object) -> bytes:
    """Strict JSON bytes of a record (or any JSON value); NaN and infinity are refused (ValueError... by msgspec)."""
    return _ENCODER.encode(value)


def strict_json(value: object, what: str = "value") -> None:
    """ValueError if `value` holds what strict JSON cannot carry: NaN or infinity (msgspec writes them as null,
    silently), or an object key that is not a string."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{what} holds {item!r}, which strict JSON cannot carry")
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"{what} holds a key {key!r} that is not a string")
                stack.append(inner)
        elif isinstance(item, list | tuple):
            stack.extend(item)


def snake(name: str) -> str:
    """camelCase -> snake_case (`budgetMs` -> `budget_ms`)."""
    return _CAMEL.sub(r"_\1", name).lower()


def _dotted(path: str) -> str:
    """msgspec's `$.args.budget_ms` / `$.records[0].t` path without its `$`: `args.budget_ms`, `records[0].t`."""
    return path[1:] if path.startswith(".") else path


def _join(path: str, name: str) -> str:
    if not path or not name:
        return path or name
    return f"{path}{name}" if name.startswith("[") else f"{path}.{name}"


def _fields_at(kind: Any, path: str) -> tuple[str, ...]:
    """The field names of the record found at `path` under `kind` (empty when there is none to name)."""
    info: Any = msgspec.inspect.type_info(kind)
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        info = _descend(info, part)
        if info is None:
            return ()
    return tuple(field.encode_name for field in _struct_fields(info))


def _struct_fields(info: Any) -> Iterator[Any]:
    if isinstance(info, msgspec.inspect.StructType):
        yield from info.fields
    elif isinstance(info, msgspec.inspect.UnionType):
        for member in info.types:
            yield from _struct_fields(member)


def _descend(info: Any, part: str) -> Any:
    if isinstance(info, msgspec.inspect.UnionType):
        for member in info.types:
            found = _descend(member, part)
            if found is not None:
                return found
        return None
    if part.startswith("["):
        return getattr(info, "item_type", None)
    if isinstance(info, msgspec.inspect.StructType):
        for field in info.fields:
            if field.encode_name == part:
                return field.type
    if isinstance(info, msgspec.inspect.DictType):
        return info.value_type
    return None


def refusal(error: msgspec.MsgspecError, kind: Any, *, code: str, what: str, prefix: str = "") -> InputError:
    """The typed refusal of a msgspec error on input meant as `kind` (`what` names the input in the message)."""
    text = str(error)
    if isinstance(error, msgspec.DecodeError) and not isinstance(error, msgspec.ValidationError):
        return InputError(code, f"{what}: not JSON ({text})", field=prefix or None, expected="a JSON object")
    at = _AT.search(text)
    path = _dotted(at.group("path")) if at else ""
    head = text[: at.start()] if at else text
    full = _join(prefix, path)
    if match := _UNKNOWN.match(head):
        name = match.group("name")
        known = _fields_at(kind, path)
        hint = _hint(name, known)
        field = _join(full, name)
        message = f"{what}: unknown field {field}" + (f" (did you mean {hint}?)" if hint else "")
        if known and not hint:
            message += f"; known fields: {', '.join(known)}"
        return InputError(
            code, message, field=field, expected=f"one of: {', '.join(known)}" if known else None, hint=hint
        )
    if match := _MISSING.match(head):
        field = _join(full, match.group("name"))
        return InputError(code, f"{what}: missing required field {field}", field=field, expected="a value")
    if match := _EXPECTED.match(head):
        expected = match.group("expected").replace("`", "")
        got = match.group("got")
        where = full or "(the whole input)"
        message = f"{what}: {where} must be {expected}" + (f", got {got}" if got else "")
        return InputError(code, message, field=full or None, expected=expected)
    where = full or "(the whole input)"
    return InputError(code, f"{what}: {where}: {head}", field=full or None, expected=None)


def _hint(name: str, known: tuple[str, ...]) -> str | None:
    """The known field a misspelt name most likely means: its snake_case form, else a close match."""
    if not known:
        return None
    if snake(name) in known:
        return snake(name)
    close = difflib.get_close_matches(snake(name), known, n=1, cutoff=0.8)
    return close[0] if close else None


@overload
def decode_json(data: bytes | str, kind: type[T], *, code: str, what: str, prefix: str = "") -> T: ...
@overload
def decode_json(data: bytes | str, kind: Any, *, code: str, what: str, prefix: str = "") -> Any: ...
def decode_json(data: bytes | str, kind: Any, *, code: str, what: str, prefix: str = "") -> Any:
    """Decode JSON bytes strictly as `kind`; InputError naming the field otherwise."""
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.MsgspecError as error:
        raise refusal(error, kind, code=code, what=what, prefix=prefix) from None


@overload
def convert(value: object, kind: type[T], *, code: str, what: str, prefix: str = "") -> T: ...
@overload
def convert(value: object, kind: Any, *, code: str, what: str, prefix: str = "") -> Any: ...
def convert(value: object, kind: Any, *, code: str, what: str, prefix: str = "") -> Any:
    """Convert plain JSON values strictly into `kind`; InputError naming the field otherwise."""
    try:
        return msgspec.convert(value, type=kind)
    except msgspec.MsgspecError as error:
        raise refusal(error, kind, code=code, what=what, prefix=prefix) from None
