"""The MCP tools table (issue 13, 2-3): exact names, each tool its daemon op's record without `session`, schemas
generated from the records with an object at their root, and strict decoding that refuses exactly what the input
schema refuses, naming the field."""

from __future__ import annotations

from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.errors import InputError
from eukhe.mcp.tools import TOOLS, object_schema
from eukhe.records.daemon import OPS
from eukhe.records.jobs import Detached, JobList, JobRow, Settled
from eukhe.records.output import OutputWindow

VALID: dict[str, dict[str, Any]] = {
    "bash": {"command": "true", "budget_ms": 5},
    "ipython": {"code": "1", "budget_ms": None},
    "jobs_list": {},
    "jobs_wait": {"job": "job-1", "timeout_ms": 0},
    "jobs_cancel": {"job": "job-1"},
}

WINDOW = OutputWindow(
    text="hi\n", bytes_kept=3, bytes_dropped=0, lines_kept=1, lines_dropped=0, notice=None, artifact=None
)
ANSWERS: list[Any] = [
    Settled(job="job-1", kind="bash", command="echo hi", exit_code=0, killed=False, output=WINDOW),
    Detached(job="job-1", kind="bash", command="sleep 9", budget_ms=5, output=WINDOW),
    Settled(job=None, kind="cell", command="1", exit_code=0, killed=False, output=WINDOW, outcome="ok", result="1"),
]


def fields(record: Any) -> dict[str, Any]:
    """A record type's fields: name -> (type info without its description, required)."""
    found = {}
    for field in msgspec.inspect.type_info(record).fields:
        kind = field.type.type if isinstance(field.type, msgspec.inspect.Metadata) else field.type
        found[field.name] = (kind, field.required)
    return found


def test_the_tools_are_exactly_those_that_exist_now() -> None:
    assert list(TOOLS) == ["bash", "ipython", "jobs_list", "jobs_wait", "jobs_cancel"]
    assert set(VALID) == set(TOOLS)


@pytest.mark.parametrize("name", list(TOOLS))
def test_each_tool_is_its_daemon_op_without_session(name: str) -> None:
    tool = TOOLS[name]
    op = OPS[tool.op]
    assert fields(op.args) == {"session": (msgspec.inspect.StrType(), True), **fields(tool.args)}
    assert tool.answer is op.answer


@pytest.mark.parametrize("name", list(TOOLS))
def test_each_schema_is_generated_from_the_records_with_an_object_at_its_root(name: str) -> None:
    listing = TOOLS[name].listing()
    assert listing.name == name
    assert listing.input_schema == object_schema(TOOLS[name].args)
    assert listing.input_schema["type"] == "object"
    assert listing.input_schema["additionalProperties"] is False
    assert "session" not in listing.input_schema["properties"]
    assert listing.output_schema is not None
    assert listing.output_schema["type"] == "object"
    assert listing.description
    for prop in listing.input_schema["properties"].values():
        assert prop["description"], "every argument is described for a model"
    jsonschema.Draft202012Validator.check_schema(listing.input_schema)
    jsonschema.Draft202012Validator.check_schema(listing.output_schema)


@pytest.mark.parametrize("answer", ANSWERS)
def test_the_output_schema_accepts_the_answer_record_and_nothing_else(answer: Any) -> None:
    schema = TOOLS["bash"].listing().output_schema
    assert schema is not None
    jsonschema.validate(answer.to_json(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**answer.to_json(), "status": "running"}, schema)
    listing = TOOLS["jobs_list"].listing().output_schema
    assert listing is not None
    row = JobRow(
        id="job-1",
        kind="bash",
        command="true",
        status="ended",
        started_ms=1,
        bytes_kept=0,
        bytes_dropped=0,
        lines_kept=0,
        lines_dropped=0,
        exit_code=0,
        killed=False,
    )
    jsonschema.validate(JobList(jobs=[row]).to_json(), listing)


def test_a_bad_argument_is_refused_naming_its_field() -> None:
    bash = TOOLS["bash"]
    with pytest.raises(InputError) as unknown:
        bash.decode({"command": "true", "budgetMs": 5})
    refusal = (unknown.value.code, unknown.value.field, unknown.value.hint)
    assert refusal == ("bad_tool_arguments", "budgetMs", "budget_ms")
    with pytest.raises(InputError) as mistyped:
        bash.decode({"command": 3})
    assert mistyped.value.field == "command"
    assert "bash" in str(mistyped.value)
    with pytest.raises(InputError) as missing:
        TOOLS["jobs_wait"].decode({})
    assert missing.value.field == "job"
    with pytest.raises(InputError) as negative:
        bash.decode({"command": "true", "budget_ms": -1})
    assert negative.value.field == "budget_ms"


json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()),
    st.text(max_size=4),
    st.lists(st.integers(0, 3), max_size=2),
)


@given(st.sampled_from(list(TOOLS)), st.data())
def test_decoding_refuses_exactly_what_the_input_schema_refuses(name: str, data: st.DataObject) -> None:
    """Valid arguments with one field added, dropped or retyped: the decoder and the schema agree."""
    args = dict(VALID[name])
    change = data.draw(st.sampled_from(["add", "drop", "retype"]))
    if change == "add":
        args[data.draw(st.text(min_size=1, max_size=6))] = data.draw(json_values)
    elif args:
        key = data.draw(st.sampled_from(sorted(args)))
        if change == "drop":
            del args[key]
        else:
            args[key] = data.draw(json_values)
    schema = TOOLS[name].listing().input_schema
    try:
        jsonschema.validate(args, schema)
        accepted = True
    except jsonschema.ValidationError:
        accepted = False
    refusal: InputError | None = None
    try:
        TOOLS[name].decode(args)
    except InputError as error:
        refusal = error
    assert (refusal is None) == accepted, args
    if refusal is not None:
        assert (refusal.code, refusal.field is not None) == ("bad_tool_arguments", True)
