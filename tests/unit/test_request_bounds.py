"""The bounds every client checks before it sends a request (`eukhe.daemon.client.bounded_request`): a line within
the daemon's MAX_REQUEST_BYTES and each field within its own (a bash command within one program argument), else
RequestTooLargeError naming the field and the limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.daemon.client import bounded_request
from eukhe.daemon.wire import (
    MAX_ARGUMENT_BYTES,
    MAX_REQUEST_BYTES,
    encode_request,
    largest_field,
    over_field_bound,
)
from eukhe.errors import RequestTooLargeError

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (dotted path, value) that is not a non-empty object or list."""
    if isinstance(value, dict) and value:
        return [found for key, item in value.items() for found in leaves(item, f"{path}.{key}" if path else key)]
    if isinstance(value, list) and value:
        return [found for i, item in enumerate(value) for found in leaves(item, f"{path}.{i}" if path else str(i))]
    return [(path, value)]


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@given(st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=3), VALUES, max_size=5))
def test_largest_field_names_a_leaf_whose_json_is_the_longest(args: dict[str, Any]) -> None:
    path, size = largest_field(args)
    found = dict(leaves(args))
    assert path in found and size == json_bytes(found[path])
    assert size == max(json_bytes(value) for value in found.values())


def test_largest_field_is_named_within_a_tool_calls_own_arguments() -> None:
    payload = {"session": "s", "tool": "write", "args": {"path": "p", "content": "x" * 100}}
    assert largest_field(payload, "tool.call") == ("content", 102)
    assert largest_field({"a": [1, {"b": "yyyy"}]}) == ("a.1.b", 6)


@pytest.mark.parametrize("op", ["bash", "tool.call"])
@given(extra=st.integers(min_value=-3, max_value=3), wide=st.booleans())
def test_a_bash_command_is_bounded_by_one_program_argument(op: str, extra: int, wide: bool) -> None:
    char = "é" if wide else "x"  # 2 bytes or 1 in UTF-8: the bound is on bytes
    count = (MAX_ARGUMENT_BYTES + extra) // len(char.encode())
    command = char * count
    args: dict[str, Any] = {"session": "s", "command": command}
    if op == "tool.call":
        args = {"session": "s", "tool": "bash", "args": {"command": command}}
    over = len(command.encode()) > MAX_ARGUMENT_BYTES
    assert (over_field_bound(op, args) is not None) is over
    if over:
        with pytest.raises(RequestTooLargeError) as refused:
            bounded_request(1, op, args, "bash")
        assert (refused.value.field, refused.value.size, refused.value.limit) == (
            "command",
            len(command.encode()),
            MAX_ARGUMENT_BYTES,
        )
    else:
        assert bounded_request(1, op, args) == encode_request(1, op, args)
    assert over_field_bound("fs.write", {"session": "s", "content": command}) is None, "only bash's command"


def test_a_line_over_the_bound_is_refused_naming_its_largest_field_and_one_at_it_is_sent() -> None:
    envelope = len(encode_request(1, "fs.write", {"session": "s", "path": "p", "content": ""})) - 1
    fits = {"session": "s", "path": "p", "content": "x" * (MAX_REQUEST_BYTES - envelope)}
    assert len(bounded_request(1, "fs.write", fits)) - 1 == MAX_REQUEST_BYTES
    over = {**fits, "content": fits["content"] + "x"}
    with pytest.raises(RequestTooLargeError) as refused:
        bounded_request(1, "fs.write", over)
    error = refused.value
    assert (error.code, error.field, error.limit, error.size) == (
        "too_large",
        "content",
        MAX_REQUEST_BYTES,
        1 + (MAX_REQUEST_BYTES),
    )
    assert error.details() == {"limit": MAX_REQUEST_BYTES, "size": MAX_REQUEST_BYTES + 1}
    assert str(error).startswith("fs.write: content is too large: the request would be ")
    assert f"over the {MAX_REQUEST_BYTES} bytes (32 MiB) a request to the daemon carries" in str(error)
