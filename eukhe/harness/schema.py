"""A small JSON-schema check for tool arguments (S2 "A tool call": a `ToolRegistration` names its args' schema).

It checks the subset tools use: `type` (object, string, integer, number, boolean, array, null, or a list of them),
`properties`, `required`, `additionalProperties: false`, `items` and `enum`. Anything else in a schema is accepted
unchecked. A mismatch raises `ToolArgumentsError` naming the path and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eukhe.errors import UsageError

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "null": (type(None),),
}


class ToolArgumentsError(UsageError):
    """A tool call's arguments do not match the tool's schema."""

    code = "bad_tool_arguments"

    def __init__(self, tool: str, path: str, expected: str) -> None:
        super().__init__(f"{tool}: argument {path or '(root)'}: expected {expected}")
        self.tool = tool
        self.path = path
        self.expected = expected


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(name, (object,)))


def check_args(tool: str, schema: Mapping[str, Any], value: Any, path: str = "") -> None:
    """Raise ToolArgumentsError unless `value` matches `schema` (the subset above)."""
    wanted = schema.get("type")
    if wanted is not None:
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        if not any(_is_type(value, name) for name in names):
            raise ToolArgumentsError(tool, path, " or ".join(names))
    if "enum" in schema and value not in schema["enum"]:
        raise ToolArgumentsError(tool, path, f"one of {schema['enum']!r}")
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                raise ToolArgumentsError(tool, f"{path}.{name}", "a value (required)")
        for name, item in value.items():
            if name in properties:
                check_args(tool, properties[name], item, f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                raise ToolArgumentsError(tool, f"{path}.{name}", "no such argument")
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            check_args(tool, schema["items"], item, f"{path}[{index}]")
