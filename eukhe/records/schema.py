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
