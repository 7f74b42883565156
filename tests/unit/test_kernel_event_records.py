"""The host converts each kernel event frame to its own record (`KERNEL_EVENT_RECORDS`), which must be the record the
union of kernel events would pick: one per event the gate lets through, the same value, or a refusal where the union
refuses (its message names the fields of that record, where the union's would guess from all of them)."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.gate import KERNEL_EVENTS
from eukhe.errors import InputError
from eukhe.records import kernel as wire
from eukhe.records.base import convert


def test_every_kernel_event_has_its_own_record() -> None:
    assert set(wire.KERNEL_EVENT_RECORDS) == set(KERNEL_EVENTS)
    assert set(wire.KERNEL_EVENT_RECORDS.values()) == set(get_args(wire.KernelEvent))
    for event, record in wire.KERNEL_EVENT_RECORDS.items():
        assert record.__struct_config__.tag == event


def _outcome(frame: dict[str, Any], kind: Any) -> object:
    try:
        return convert(frame, kind, code="malformed", what="a kernel frame")
    except InputError as error:
        return ("refused", error.code)


FIELD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3), st.lists(st.text(max_size=2), max_size=2)
)
FIELDS = ["id", "text", "repr", "status", "data", "ename", "evalue", "traceback", "message", "pgid", "state"]


@given(
    event=st.sampled_from(sorted(KERNEL_EVENTS)),
    fields=st.dictionaries(st.sampled_from(FIELDS), FIELD_VALUES, max_size=5),
)
def test_a_frame_converts_to_its_own_record_as_the_union_converts_it(event: str, fields: dict[str, Any]) -> None:
    frame = {"event": event, **fields}
    assert _outcome(frame, wire.KERNEL_EVENT_RECORDS[event]) == _outcome(frame, wire.KernelEvent)


@pytest.mark.parametrize("event", sorted(KERNEL_EVENTS))
def test_a_minimal_frame_of_each_event_converts_alike(event: str) -> None:
    frame = {"event": event, "id": "c1"}
    assert _outcome(frame, wire.KERNEL_EVENT_RECORDS[event]) == _outcome(frame, wire.KernelEvent)
