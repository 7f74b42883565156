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
    other definitions stay under `$defs`, which the root's `$ref`s name."""
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
    return root


def _referenced(name: str, value: Any) -> bool:
    """Whether `value` (a schema, or a part of one) refers to definition `name` (then it stays under `$defs`)."""
    if isinstance(value, dict):
        return value.get("$ref") == f"#/$defs/{name}" or any(_referenced(name, inner) for inner in value.values())
    if isinstance(value, list):
        return any(_referenced(name, inner) for inner in value)
    return False
