"""The MCP tools table: exact names, each tool its daemon op's record without `session`, schemas
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
from eukhe.records.children import ChildError, ChildReport, ChildRow, Reports, Roster
from eukhe.records.daemon import OPS
from eukhe.records.fs import EditAnswer, EditChange, GlobAnswer, GrepAnswer, ReadAnswer, WriteAnswer
from eukhe.records.jobs import Detached, JobList, JobRow, Settled
from eukhe.records.output import OutputWindow
from eukhe.records.remote import RemoteCallAnswer
from eukhe.records.workspace import HandbackConflict, HandbackFailure, HandbackReport

VALID: dict[str, dict[str, Any]] = {
    "bash": {"command": "true", "budget_ms": 5},
    "ipython": {"code": "1", "budget_ms": None},
    "jobs_list": {},
    "jobs_wait": {"job": "job-1", "timeout_ms": 0},
    "jobs_cancel": {"job": "job-1"},
    "read": {"path": "a.txt", "offset": 2, "limit": 10},
    "write": {"path": "a.txt", "content": "hi\n"},
    "edit": {"patch": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"},
    "grep": {"pattern": "def main", "path": "src", "glob": "*.py"},
    "glob": {"pattern": "**/*.py", "path": "."},
    "spawn": {"name": "worker", "code": "1 + 1", "workspace": "isolated", "timeout_ms": 1000},
    "collect": {"names": ["worker"], "timeout_ms": 0},
    "subagents": {},
    "remote_call": {"name": "add", "args": {"a": 2, "b": 3}, "budget_ms": 1000},
    "jobs_write": {"job": "job-1", "input": "6*7\n", "budget_ms": 500},
    "jobs_signal": {"job": "job-1", "signal": "INT"},
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
    """A record type's fields: name -> (type info without its description, required, default)."""
    found = {}
    for field in msgspec.inspect.type_info(record).fields:
        kind = field.type.type if isinstance(field.type, msgspec.inspect.Metadata) else field.type
        found[field.name] = (kind, field.required, field.default)
    return found


def test_the_tools_are_exactly_those_that_exist_now() -> None:
    assert list(TOOLS) == [
        "bash",
        "ipython",
        "jobs_list",
        "jobs_wait",
        "jobs_cancel",
        "read",
        "write",
        "edit",
        "grep",
        "glob",
        "spawn",
        "collect",
        "subagents",
        "remote_call",
        "jobs_write",
        "jobs_signal",
    ]
    assert set(VALID) == set(TOOLS)


@pytest.mark.parametrize("name", list(TOOLS))
def test_each_tool_is_its_daemon_op_without_session(name: str) -> None:
    tool = TOOLS[name]
    op = OPS[tool.op]
    session = (msgspec.inspect.StrType(), True, msgspec.NODEFAULT)
    passed = fields(op.args)
    passed.pop("api_key", None)  # the key a client passes along (a prompt child's), never a tool argument
    assert passed == {"session": session, **fields(tool.args)}
    assert tool.answer is op.answer


@pytest.mark.parametrize("name", list(TOOLS))
def test_each_schema_is_generated_from_the_records_with_an_object_at_its_root(name: str) -> None:
    listing = TOOLS[name].listing(structured=True)
    assert TOOLS[name].listing().output_schema is None, "without --structured: no outputSchema"
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
    schema = TOOLS["bash"].listing(structured=True).output_schema
    assert schema is not None
    jsonschema.validate(answer.to_json(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**answer.to_json(), "status": "running"}, schema)
    listing = TOOLS["jobs_list"].listing(structured=True).output_schema
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


HANDED = HandbackReport(
    parent_dir="/p",
    paths_taken=("a.txt",),
    paths_removed=(),
    conflicts=(HandbackConflict(path="b", reason="both_changed", child_version="/c/b"),),
    conflicts_dir="/c",
)
CHILD = ChildRow(
    name="w", session="s", status="answered", workspace="isolated", cwd="/c", timeout_ms=None, handback=HANDED
)
NEW_ANSWERS: dict[str, Any] = {
    "read": ReadAnswer(absolute="/w/a", offset=1, lines=1, total_lines=1, output=WINDOW),
    "write": WriteAnswer(absolute="/w/a", bytes_written=3, created=True),
    "edit": EditAnswer(changes=(EditChange(action="moved", path="/w/a", destination="/w/b"),)),
    "grep": GrepAnswer(absolute="/w", matches=1, files=1, output=WINDOW),
    "glob": GlobAnswer(absolute="/w", count=1, output=WINDOW),
    "spawn": CHILD,
    "collect": Reports(
        reports=[
            ChildReport(name="w", session="s", status="answered", answer={"any": [1]}, error=None, handback=HANDED),
            ChildReport(
                name="v",
                session="t",
                status="failed",
                answer=None,
                error=ChildError(reason="exception", message="boom", traceback=["t\n"]),
                handback=HandbackFailure(path="a", reason="EACCES", copy="/c"),
            ),
        ]
    ),
    "subagents": Roster(children=[CHILD]),
    "remote_call": RemoteCallAnswer(result={"sum": 5}),
}
"""An answer of each new tool (the file tools, children), to check against its output schema."""


@pytest.mark.parametrize("name", list(NEW_ANSWERS))
def test_the_output_schema_of_each_new_tool_accepts_its_answer_and_refuses_a_drift(name: str) -> None:
    schema = TOOLS[name].listing(structured=True).output_schema
    assert schema is not None
    answer = NEW_ANSWERS[name].to_json()
    jsonschema.validate(answer, schema)
    assert TOOLS[name].read_answer(answer) == NEW_ANSWERS[name]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**answer, "unknown": 1}, schema)
    TOOLS[name].text(NEW_ANSWERS[name])  # every answer has a text


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
    with pytest.raises(InputError) as workspace:
        TOOLS["spawn"].decode({"name": "w", "code": "1", "workspace": "copy"})
    assert workspace.value.field == "workspace"
    with pytest.raises(InputError) as names:
        TOOLS["collect"].decode({"names": ["a", 1]})
    assert names.value.field == "names[1]"
    with pytest.raises(InputError) as offset:
        TOOLS["read"].decode({"path": "a", "ofset": 1})
    assert (offset.value.field, offset.value.hint) == ("ofset", "offset")


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
