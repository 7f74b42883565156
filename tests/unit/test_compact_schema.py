"""The compact schemas the MCP tools list accept exactly what the records' generated schemas accept.

Instances are drawn from each record's own schema (so most are valid), with random values put in at random places
(so many are not); both schemas must judge every one alike, under the validator MCP clients use (jsonschema).
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eukhe.mcp.tools import TOOLS
from eukhe.records.schema import compact_schema, schema_of

KINDS = {f"{name}.{side}": getattr(tool, side) for name, tool in TOOLS.items() for side in ("args", "answer")}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3), st.floats(allow_nan=False))
anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(), inner))


def instances(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values shaped by `schema`, now and then replaced by any JSON value."""
    shaped = _shaped(schema, defs, depth)
    return st.sampled_from(range(16)).flatmap(lambda roll: anything if roll == 7 else shaped) if depth else shaped


def _shaped(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    if "$ref" in schema:
        return instances(defs[schema["$ref"].removeprefix("#/$defs/")], defs, depth)
    if "anyOf" in schema:
        return st.one_of([instances(branch, defs, depth) for branch in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        fields = {name: instances(body, defs, depth + 1) for name, body in properties.items()}
        extra = st.dictionaries(st.sampled_from(["unknown", *properties]), anything, max_size=1)
        return st.builds(
            lambda chosen, dropped, more: {
                **{k: v for k, v in chosen.items() if k in required or k not in dropped},
                **more,
            },
            st.fixed_dictionaries(fields),
            st.sets(st.sampled_from(sorted(properties) or [""]), max_size=1),
            st.sampled_from(range(8)).flatmap(lambda roll: extra if roll == 3 else st.just({})),
        )
    if kind == "array":
        return st.lists(instances(schema.get("items", {}), defs, depth + 1), max_size=2)
    if kind == "string":
        return st.text(max_size=4)
    if kind == "integer":
        return st.integers(-5, 5)
    if kind == "number":
        return st.floats(allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return anything


def valid(validator: Any, value: Any) -> bool:
    return validator.is_valid(value)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_compact_schema_accepts_exactly_what_the_records_schema_accepts(name: str) -> None:
    full = schema_of(KINDS[name])
    compact = compact_schema(full)
    full_validator = jsonschema.validators.validator_for(full)(full)
    compact_validator = jsonschema.validators.validator_for(compact)(compact)
    jsonschema.validators.validator_for(compact).check_schema(compact)

    @settings(max_examples=15, deadline=None)
    @given(instances(full, full.get("$defs", {})))
    def judged_alike(value: Any) -> None:
        assert valid(full_validator, value) == valid(compact_validator, value), value

    judged_alike()


def test_compact_schema_inlines_leaf_records_and_makes_nullable_fields_type_lists() -> None:
    compact = compact_schema(schema_of(TOOLS["bash"].answer))
    assert "$ref" not in str(compact)
    settled = compact["anyOf"][0]
    assert settled["properties"]["exit_code"] == {"type": ["integer", "null"]}
    assert settled["properties"]["output"]["properties"]["notice"] == {"type": ["string", "null"]}
