"""JSON Schemas generated from the records: every daemon op's arguments, answer and events (`eukhe schema`; the
MCP tools reuse them). Nothing here is written by hand: change a record and its schema follows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from eukhe.errors import InputError
from eukhe.records.daemon import OPS

REF = "#/$defs/{name}"


def op_schemas(names: Iterable[str] | None = None) -> dict[str, Any]:
    """`{"ops": {op: {"summary", "scope", "args", "answer", "events"}}, "$defs": {...}}` for the named ops (all by
    default); `args`, `answer` and `events` are JSON Schemas whose `$ref`s point into `$defs`."""
    chosen = list(OPS) if names is None else list(names)
    unknown = [name for name in chosen if name not in OPS]
    if unknown:
        raise InputError("usage_error", f"no op named {unknown[0]!r}; known: {', '.join(OPS)}", field="name")
    types: list[Any] = []
    for name in chosen:
        op = OPS[name]
        types.extend([op.args, op.answer])
        if op.events is not None:
            types.append(op.events)
    schemas, components = msgspec.json.schema_components(types, ref_template=REF)
    found = iter(schemas)
    ops: dict[str, Any] = {}
    for name in chosen:
        op = OPS[name]
        entry: dict[str, Any] = {"summary": op.summary, "scope": op.scope, "args": next(found), "answer": next(found)}
        entry["events"] = next(found) if op.events is not None else None
        ops[name] = entry
    return {"ops": ops, "$defs": components}


def args_schema(name: str) -> dict[str, Any]:
    """One op's arguments as a self-contained JSON Schema (its `$defs` inlined beside it)."""
    return schema_of(OPS[name].args)


def schema_of(kind: Any) -> dict[str, Any]:
    """A self-contained JSON Schema of any record type."""
    return msgspec.json.schema(kind, ref_template=REF)


def object_schema(kind: Any) -> dict[str, Any]:
    """A record's JSON Schema with an object at its root (MCP asks `type: object` of input and output schemas):
    a record's own definition is lifted to the root; a union of records becomes an object that is any of them. The
    other definitions stay under `$defs`, which the root's `$ref`s name. It is compact (`compact_schema`): clients
    validate every result against it."""
    schema = schema_of(kind)
    defs: dict[str, Any] = dict(schema.pop("$defs", {}))
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        root = dict(defs[name])
        if not _referenced(name, defs):
            del defs[name]
    else:
        root = {"type": "object", **schema}
    root.pop("title", None)
    if defs:
        root["$defs"] = defs
    return compact_schema(root)


def _referenced(name: str, value: Any) -> bool:
    """Whether `value` (a schema, or a part of one) refers to definition `name` (then it stays under `$defs`)."""
    if isinstance(value, dict):
        return value.get("$ref") == f"#/$defs/{name}" or any(_referenced(name, inner) for inner in value.values())
    if isinstance(value, list):
        return any(_referenced(name, inner) for inner in value)
    return False


_OBJECT_ONLY = frozenset({"type", "title", "description", "properties", "required", "additionalProperties"})
"""The keywords of a record's object schema: all but `type` constrain objects only, so a null passes them."""


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The same schema, cheaper to validate: each definition that refers to no other is inlined where it is named
    (a validator resolves no `$ref` for it), and a nullable `anyOf` of one type (or enum, or record) and null is one
    `type` list (or an enum with null) instead of two branches tried in turn. It accepts exactly what `schema`
    accepts."""
    defs: dict[str, Any] = schema.get("$defs", {})
    inlinable = {name: body for name, body in defs.items() if not _refers(body)}
    # Inline the leaves first, then the definitions that named only them, until nothing changes.
    while True:
        resolved = {name: _inline(body, inlinable) for name, body in defs.items() if name not in inlinable}
        newly = {name: body for name, body in resolved.items() if not _refers(body)}
        if not newly:
            break
        inlinable.update(newly)
    compacted: dict[str, Any] = _collapse(_inline({k: v for k, v in schema.items() if k != "$defs"}, inlinable))
    kept = {name: _collapse(_inline(body, inlinable)) for name, body in defs.items() if name not in inlinable}
    kept = {name: body for name, body in kept.items() if _referenced(name, compacted) or _referenced(name, kept)}
    if kept:
        compacted["$defs"] = kept
    return compacted


def _refers(value: Any) -> bool:
    """Whether a schema (or a part of one) holds a `$ref`."""
    if isinstance(value, dict):
        return "$ref" in value or any(_refers(inner) for inner in value.values())
    if isinstance(value, list):
        return any(_refers(inner) for inner in value)
    return False


def _inline(value: Any, defs: dict[str, Any]) -> Any:
    """`value` with every `$ref` to one of `defs` replaced by the definition (when the `$ref` stands alone)."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        name = ref.removeprefix("#/$defs/") if isinstance(ref, str) else None
        if name in defs and len(value) == 1:
            return _inline(defs[name], defs)
        return {key: _inline(inner, defs) for key, inner in value.items()}
    if isinstance(value, list):
        return [_inline(inner, defs) for inner in value]
    return value


def _collapse(value: Any) -> Any:
    """`value` with each nullable `anyOf` of two branches made one schema (see `compact_schema`)."""
    if isinstance(value, list):
        return [_collapse(inner) for inner in value]
    if not isinstance(value, dict):
        return value
    value = {key: _collapse(inner) for key, inner in value.items()}
    branches = value.get("anyOf")
    if not (isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches):
        return value
    other = branches[0] if branches[1] == {"type": "null"} else branches[1]
    merged = _or_null(other)
    if merged is None or any(key in value for key in merged if key not in ("title", "description")):
        return value
    rest = {key: inner for key, inner in value.items() if key != "anyOf"}
    return {**merged, **rest}


def _or_null(schema: Any) -> dict[str, Any] | None:
    """One schema that accepts what `schema` accepts and null, when there is a simple one."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if set(schema) == {"type"} and isinstance(kind, str):
        return {"type": [kind, "null"]}
    if set(schema) == {"enum"} and isinstance(schema["enum"], list):
        return {"enum": [*schema["enum"], None]}
    if kind == "object" and set(schema) <= _OBJECT_ONLY:
        return {**schema, "type": ["object", "null"]}
    return None
