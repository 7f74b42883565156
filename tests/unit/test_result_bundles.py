"""`bundle_of`, the kernel's MIME bundle of a cell's value: a plain built-in value is its repr alone, and a value
of a subclass of one still gives the rich representations it defines."""

from __future__ import annotations

from typing import Any

from eukhe_kernel.pictures import PLAIN_TYPES, bundle_of


class HtmlDict(dict[str, Any]):
    def _repr_html_(self) -> str:
        return "<b>table</b>"


def test_a_plain_built_in_value_is_its_repr_alone() -> None:
    values: list[Any] = [2, 1.5, 1j, True, "s", b"b", bytearray(b"a"), None, [1], (1,), {"a": 1}, {1}, range(3)]
    assert {type(value) for value in values} == PLAIN_TYPES
    for value in values:
        assert bundle_of(value) == {"text/plain": repr(value)}


def test_a_subclass_of_a_plain_type_still_gives_its_rich_representation() -> None:
    assert bundle_of(HtmlDict(a=1)) == {"text/plain": "{'a': 1}", "text/html": "<b>table</b>"}
