"""`eukhe remote list|call` against a real daemon: a newcomer defines `add` in a cell, sees it
with its schema, calls it and gets 5, and gets each typed error where the spec says."""

from __future__ import annotations

import json

import pytest

from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real

ADD = "@rlm.remote\ndef add(a: int, b: int) -> int:\n    'Add two integers.'\n    return a + b\n"
ADD_SCHEMA = {
    "title": "add",
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
OTHERS = """\
import math, os, threading
@rlm.remote
def boom() -> None:
    raise ValueError('no good')
@rlm.remote
def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan
@rlm.remote
async def later(n: int) -> int:
    return n
@rlm.remote
def hang() -> None:
    threading.Event().wait()
@rlm.remote
def leave() -> None:
    os._exit(5)
"""


def error_of(world: DaemonEnv, *args: str) -> dict[str, str | None]:
    """`eukhe remote call ... --json` that answers an error: exit 1 and `{"error": {kind, message, reason}}`."""
    code, answer = world.json_error("remote", "call", *args)
    assert code == 1, answer
    assert list(answer) == ["error"] and set(answer["error"]) == {"kind", "message", "reason"}, answer
    error: dict[str, str | None] = answer["error"]
    return error


def test_a_newcomer_defines_add_lists_it_with_its_schema_and_calls_it(world: DaemonEnv) -> None:
    project = world.root / "project"
    project.mkdir()
    session = str(world.json("session", "create", "--cwd", str(project))["id"])
    call = ("--session", session)

    not_running = error_of(world, *call, "add", "--args", '{"a": 2, "b": 3}')
    assert (not_running["kind"], not_running["reason"]) == ("not_running", None)
    assert world.json("remote", "list", *call) == {"functions": []}

    defined = world.json("ipython", *call, "-c", ADD)
    assert (defined["outcome"], defined["error"]) == ("ok", None)
    listed = world.json("remote", "list", *call)
    assert listed == {
        "functions": [
            {
                "name": "add",
                "tool": "remote/add",
                "doc": "Add two integers.",
                "schema": ADD_SCHEMA,
                "module": "__main__",
                "qualname": "add",
            }
        ]
    }
    shown = world.cli("remote", "list", *call)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"add: Add two integers.\n  {json.dumps(ADD_SCHEMA, separators=(',', ':'))}\n"

    assert world.json("remote", "call", *call, "add", "--args", '{"a": 2, "b": 3}') == {"result": 5}
    plain = world.cli("remote", "call", *call, "add", "--args", '{"a": 2, "b": 3}')
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "5\n", "")

    # Each typed error where the spec says it.
    unknown = error_of(world, *call, "sub", "--args", "{}")
    assert unknown["kind"] == "unknown" and "no remote function 'sub'" in str(unknown["message"])
    wrong = error_of(world, *call, "add", "--args", '{"a": 2}')
    assert wrong == {
        "kind": "failed",
        "reason": "bad_arguments",
        "message": "TypeError: add() missing 1 required positional argument: 'b'",
    }
    said = world.cli("remote", "call", *call, "add", "--args", '{"a": 2}')
    assert (said.returncode, said.stdout) == (1, "")
    assert (
        said.stderr
        == "eukhe: remote add: failed (bad_arguments): TypeError: add() missing 1 required positional argument: 'b'\n"
    )

    assert world.json("ipython", *call, "-c", OTHERS)["outcome"] == "ok"
    assert [f["name"] for f in world.json("remote", "list", *call)["functions"]] == [
        "add",
        "boom",
        "hang",
        "later",
        "leave",
        "ratio",
    ]
    assert error_of(world, *call, "boom") == {"kind": "failed", "reason": "raised", "message": "ValueError: no good"}
    nan = error_of(world, *call, "ratio", "--args", '{"a": 1.0, "b": 0.0}')
    assert (nan["kind"], nan["reason"]) == ("failed", "unencodable")
    bad_async = error_of(world, *call, "later", "--args", '{"m": 1}')
    assert bad_async["message"] == "TypeError: later() got an unexpected keyword argument 'm'"
    timeout = error_of(world, *call, "hang", "--budget-ms", "300")
    assert (timeout["kind"], timeout["message"]) == (
        "timeout",
        "remote function 'hang' did not answer within 300 ms (a sync function goes on in its own thread; the "
        "kernel serves the next cells and calls)",
    )
    assert world.json("remote", "call", *call, "later", "--args", '{"n": 7}') == {"result": 7}  # the kernel goes on
    assert world.json("ipython", *call, "-c", "6 * 7")["result"] == "42"
    gone = error_of(world, *call, "leave")
    assert gone["kind"] == "unreachable" and "exited with code 5" in str(gone["message"])
    assert world.json("remote", "list", *call) == {"functions": []}  # its functions went with the kernel

    usage = world.cli("remote", "call", *call, "add", "--args", "[1, 2]")
    assert usage.returncode == 2
    assert "--args must be a JSON object" in usage.stderr
