"""The schemas generated from the records: every daemon op has one for its arguments and its answer, and the daemon
refuses exactly what the schema refuses (Hypothesis: valid requests with one field added, dropped or retyped)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from eukhe.daemon.protocol import ProtocolFault, Request, parse_request
from eukhe.records.daemon import OPS
from eukhe.records.schema import args_schema, op_schemas, schema_of

VALID: dict[str, dict[str, Any]] = {
    "ping": {},
    "status": {},
    "stop": {},
    "session.create": {"cwd": "/w"},
    "session.list": {},
    "session.ping": {"session": "s"},
    "session.show": {"session": "s"},
    "bash": {"session": "s", "command": "true", "budget_ms": 5},
    "ipython": {"session": "s", "code": "1", "budget_ms": None},
    "tool.call": {"session": "s", "tool": "bash", "args": {"command": "true"}},
    "session.calls": {"session": "s"},
    "session.network": {"session": "s"},
    "jobs.list": {"session": "s"},
    "jobs.wait": {"session": "s", "job": "j", "timeout_ms": 0},
    "jobs.cancel": {"session": "s", "job": "j"},
    "watch": {"session": "s"},
    "tree.navigate": {"session": "s", "entry": None},
    "tree.fork": {"session": "s", "entry": "e1"},
    "fs.read": {"session": "s", "path": "a.txt", "offset": 2, "limit": None},
    "fs.write": {"session": "s", "path": "a.txt", "content": "x"},
    "fs.edit": {"session": "s", "patch": "*** Begin Patch\n*** End Patch"},
    "fs.grep": {"session": "s", "pattern": "x", "path": ".", "glob": "*.py"},
    "fs.glob": {"session": "s", "pattern": "*.py"},
    "session.close": {"session": "s", "force": True},
    "session.delete": {"session": "s", "force": False},
    "gc": {"dry_run": True},
    "session.cull": {"session": "s", "session_idle_ms": 600000, "kernel_idle_ms": 0},
    "session.pins": {"session": "s"},
    "children.spawn": {"session": "s", "name": "c1", "code": "1", "workspace": "isolated", "timeout_ms": 5},
    "children.list": {"session": "s"},
    "children.collect": {"session": "s", "names": ["c1"], "timeout_ms": None},
    "children.delete": {"session": "s", "name": "c1"},
    "child.run": {"session": "s", "code": "1", "timeout_ms": None},
    "remote.list": {"session": "s"},
    "remote.call": {"session": "s", "name": "add", "args": {"a": 2, "b": 3}, "budget_ms": 1000},
    "cancel": {"request": 3},
    "jobs.write": {"session": "s", "job": "j", "input": "6*7\n", "budget_ms": 100},
    "jobs.signal": {"session": "s", "job": "j", "signal": "INT"},
    "jobs.attach": {"session": "s", "job": "j"},
    "jobs.input": {"session": "s", "job": "j", "input": "\u0003"},
}
"""A valid request's arguments for every op (the test checks they cover OPS)."""

json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()),
    st.text(max_size=4),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)


def line(op: str, args: dict[str, Any]) -> bytes:
    return json.dumps({"v": 1, "id": 1, "op": op, "args": args}).encode()


def schema_accepts(op: str, args: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(args, args_schema(op))
    except jsonschema.ValidationError:
        return False
    return True


def test_every_op_has_a_valid_example_and_schemas_for_its_arguments_and_answer() -> None:
    assert set(VALID) == set(OPS)
    document = op_schemas()
    assert set(document["ops"]) == set(OPS)
    for op, entry in document["ops"].items():
        assert entry["args"] and entry["answer"], op
        assert schema_accepts(op, VALID[op]), op
        assert isinstance(parse_request(line(op, VALID[op])), Request), op
    jsonschema.Draft202012Validator.check_schema(schema_of(OPS["bash"].answer))


@given(st.sampled_from(sorted(OPS)), st.data())
def test_the_daemon_refuses_what_the_schema_refuses(op: str, data: st.DataObject) -> None:
    args = dict(VALID[op])
    mutation = data.draw(st.sampled_from(["add", "drop", "retype"] if args else ["add"]))
    if mutation == "add":
        args[data.draw(st.text(min_size=1, max_size=12).filter(lambda name: name not in args))] = data.draw(json_values)
    elif mutation == "drop":
        del args[data.draw(st.sampled_from(sorted(args)))]
    else:
        args[data.draw(st.sampled_from(sorted(args)))] = data.draw(json_values)
    parsed = parse_request(line(op, args))
    assert schema_accepts(op, args) == isinstance(parsed, Request), (op, args, parsed)
    if isinstance(parsed, ProtocolFault):
        assert parsed.code == "bad_args"
        assert parsed.field is not None and parsed.field.startswith("args")


def test_eukhe_schema_prints_every_op() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "schema", "--json"], capture_output=True, text=True, check=True
    )
    assert set(json.loads(done.stdout)["ops"]) == set(OPS)
    one = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "schema", "bash"], capture_output=True, text=True, check=True
    )
    assert "BashArgs" in json.loads(one.stdout)["$defs"]
    wrong = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "schema", "nope", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode == 2
    assert json.loads(wrong.stdout)["error"] == "usage_error"
