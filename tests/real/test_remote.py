"""`@rlm.remote` in the kernel stub (spec S3 "@remote" 1, 3-5; the spec's `test_remote.py`): the schema of the keyword
arguments from the type hints, the `remote.register` and `call` requests, typed errors in the `done` frame, the
call lane (the reader thread, stdin's owner, starts each call: never behind a cell), stdin for a remote function.

The kernel is driven over its pipes (`RawKernel`): the test plays the host and reads every frame as a line, so it
checks the lines themselves are strict JSON.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import msgspec
import pytest

from eukhe_kernel.rlm.remote import describe
from tests.real.kernel_support import RawKernel, run

pytestmark = pytest.mark.real


def strict(line: dict[str, Any]) -> dict[str, Any]:
    """A frame as the kernel wrote it, parsed again by a parser that refuses NaN and Infinity."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"the frame holds {constant}: not strict JSON")

    parsed: dict[str, Any] = json.loads(json.dumps(line), parse_constant=refuse)
    return parsed


class StubHost:
    """The test as the kernel's host: cells that register functions, calls, and the frames they answer."""

    def __init__(self, kernel: RawKernel) -> None:
        self.kernel = kernel
        self.registered: list[dict[str, Any]] = []
        self.dones: dict[str, dict[str, Any]] = {}  # `done` frames read while waiting for another
        self._ids = 0

    def _next(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    async def cell(self, code: str) -> dict[str, Any]:
        """Run a cell, answering its `remote.register` requests `ok`; its `done` (its result in `result`)."""
        cell_id = self._next("c")
        self.kernel.send({"request": "execute", "id": cell_id, "code": code})
        result: dict[str, Any] = {}
        while True:
            frame = await self.kernel.next_frame()
            if frame["event"] == "host_request" and frame["type"] == "remote.register":
                self.registered.append(frame["params"])
                self.kernel.send({"request": "host_reply", "id": frame["id"], "status": "ok", "result": {}})
            elif frame["event"] in ("result", "error") and frame["id"] == cell_id:
                result = frame
            elif frame["event"] == "done" and frame["id"] == cell_id:
                return {**frame, "result": result.get("repr"), "error": result if frame["status"] != "ok" else None}
            elif frame["event"] == "done":
                self.dones[frame["id"]] = frame

    def call(self, name: str, args: Any, *, module: str = "__main__", function: str | None = None) -> str:
        """Send a call request; its id."""
        call_id = self._next("r")
        message = {"request": "call", "id": call_id, "name": name, "module": module, "function": function or name}
        self.kernel.send({**message, "args": args})
        return call_id

    async def done(self, call_id: str) -> dict[str, Any]:
        """The `done` frame of a call (or any request): strict JSON. Other `done` frames are kept for later."""
        while call_id not in self.dones:
            frame = await self.kernel.next_frame()
            if frame["event"] == "done":
                self.dones[frame["id"]] = frame
        return strict(self.dones.pop(call_id))

    async def answer(self, name: str, args: Any, **where: str) -> dict[str, Any]:
        return await self.done(self.call(name, args, **where))


def with_stub(scenario: Any) -> None:
    async def body() -> None:
        kernel = await RawKernel.start()
        try:
            await scenario(StubHost(kernel))
        finally:
            await kernel.close()

    run(body())


# ---- the schema: from the type hints, by msgspec ------------------------------------------------------------------


class Opaque:
    """A type msgspec has no JSON Schema for."""


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


def test_the_schema_of_the_keyword_arguments_comes_from_the_type_hints() -> None:
    def shapes(
        a: int,
        b: float = 1.5,
        *,
        names: list[str] | None = None,
        at: Point,
        small: Annotated[int, msgspec.Meta(ge=0, le=9)] = 3,
        odd: float = float("nan"),
        free: Any = None,  # Any: any JSON (as no hint)
        **extra: bool,
    ) -> None:
        """Shapes.

        More words."""

    entry = describe(shapes)
    assert (entry.name, entry.qualname, entry.doc, entry.is_async) == (
        "shapes",
        shapes.__qualname__,
        "Shapes.\n\nMore words.",
        False,
    )
    schema = entry.schema
    kinds, defs = msgspec.json.schema_components(
        [int, float, list[str] | None, Point, Annotated[int, msgspec.Meta(ge=0, le=9)], float, Any, bool],
        ref_template="#/$defs/{name}",
    )
    assert schema == {
        "title": "shapes",
        "type": "object",
        "properties": {
            "a": kinds[0],
            "b": {**kinds[1], "default": 1.5},
            "names": {**kinds[2], "default": None},
            "at": kinds[3],
            "small": {**kinds[4], "default": 3},
            "odd": kinds[5],  # a NaN default has no strict JSON: not in the schema (still not required)
            "free": {**kinds[6], "default": None},
        },
        "required": ["a", "at"],
        "additionalProperties": kinds[7],
        "$defs": defs,
    }
    assert kinds[0] == {"type": "integer"} and kinds[3] == {"$ref": "#/$defs/Point"}
    assert defs["Point"]["required"] == ["x"]
    json.dumps(schema, allow_nan=False)  # strict JSON, as the register frame must be


def test_a_parameter_that_cannot_be_given_by_keyword_is_refused_at_decoration() -> None:
    def positional(a: int, /, b: int) -> int:
        return a + b

    def starred(*numbers: int) -> int:
        return sum(numbers)

    class Local:
        pass

    def opaque(thing: Opaque) -> None:
        pass

    def unresolved(thing: Local) -> None:  # under `from __future__ import annotations`: a name at module level
        pass

    with pytest.raises(TypeError, match=r"parameter 'a' is positional-only, and a call gives every argument by"):
        describe(positional)
    with pytest.raises(TypeError, match=r"parameter \*numbers takes positional arguments"):
        describe(starred)
    with pytest.raises(TypeError, match=r"msgspec cannot give a JSON Schema of parameter 'thing'"):
        describe(opaque)
    with pytest.raises(TypeError, match=r"its type hints do not resolve \(NameError: name 'Local' is not defined\)"):
        describe(unresolved)
    with pytest.raises(ValueError, match=r"'no spaces' cannot name a tool"):
        describe(lambda: None, "no spaces")
    with pytest.raises(TypeError, match="needs a function"):
        describe(42)  # type: ignore[arg-type]
    assert describe(lambda **anything: None, "free").schema["additionalProperties"] == {}
    bare = describe(lambda x, y=1: None, "bare").schema  # no hints: any JSON
    assert (bare["properties"], bare["required"]) == ({"x": {}, "y": {"default": 1}}, ["x"])


# ---- register and call --------------------------------------------------------------------------------------------


def test_the_register_request_and_a_call_request() -> None:
    async def scenario(host: StubHost) -> None:
        defined = await host.cell(
            "@rlm.remote\n"
            "def add(a: int, b: int) -> int:\n"
            "    'Add two integers.'\n"
            "    return a + b\n"
            "@rlm.remote(name='shout')\n"
            "def loud(text: str = 'hi') -> str:\n"
            "    return text.upper()\n"
            "add(1, 2), loud.__name__"
        )
        assert defined["result"] == "(3, 'loud')"  # the decorator returns the function unchanged
        assert host.registered == [
            {
                "name": "add",
                "module": "__main__",
                "qualname": "add",
                "doc": "Add two integers.",
                "schema": {
                    "title": "add",
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                    "additionalProperties": False,
                },
            },
            {
                "name": "shout",
                "module": "__main__",
                "qualname": "loud",
                "doc": None,
                "schema": {
                    "title": "shout",
                    "type": "object",
                    "properties": {"text": {"type": "string", "default": "hi"}},
                    "required": [],
                    "additionalProperties": False,
                },
            },
        ]
        call = host.call("add", {"a": 2, "b": 3})
        assert await host.done(call) == {"event": "done", "id": call, "status": "ok", "result": 5}
        assert (await host.answer("shout", {}, function="loud"))["result"] == "HI"
        # The call names the function the host was told of: another module or qualname is unknown here.
        for where in ({"module": "elsewhere"}, {"function": "loud"}):
            refused = await host.answer("add", {"a": 1, "b": 1}, **where)
            assert (refused["status"], refused["reason"]) == ("error", "unknown")
        nothing = await host.answer("missing", {})
        assert (nothing["status"], nothing["reason"]) == ("error", "unknown")
        assert "no remote function 'missing'" in nothing["message"]

        # Registering a name again replaces it.
        await host.cell("@rlm.remote(name='add')\ndef add(a: int, b: int) -> int:\n    return a * b\n")
        assert host.registered[-1]["name"] == "add"
        assert (await host.answer("add", {"a": 2, "b": 3}))["result"] == 6

        # A function that raises: its type and message; SystemExit too, and the kernel lives on.
        await host.cell(
            "@rlm.remote\ndef boom(code: int) -> None:\n"
            "    if code:\n        raise SystemExit(code)\n    raise ValueError('no good')\n"
        )
        raised = await host.answer("boom", {"code": 0})
        assert (raised["status"], raised["reason"], raised["message"]) == ("error", "raised", "ValueError: no good")
        leaving = await host.answer("boom", {"code": 3})
        assert (leaving["reason"], leaving["message"]) == ("raised", "SystemExit: 3")
        # Arguments are converted to the hints by msgspec; one that does not fit is the call's TypeError.
        typed = await host.answer("add", {"a": "2", "b": 3})
        assert (typed["reason"], typed["message"]) == (
            "bad_arguments",
            "TypeError: add() argument 'a': Expected `int`, got `str`",
        )
        listed = await host.answer("add", [2, 3])
        assert (listed["reason"], listed["message"]) == (
            "bad_arguments",
            "TypeError: a call's args must be a JSON object",
        )
        assert (await host.cell("add(4, 5)"))["result"] == "20"

    with_stub(scenario)


def test_a_nan_result_and_bad_async_arguments_answer_typed_errors() -> None:
    """NaN or Infinity: `unencodable`, and the frame stays valid (strict) JSON; an `async def` given wrong arguments:
    its TypeError text; then cells and calls still work."""

    async def scenario(host: StubHost) -> None:
        await host.cell(
            "import math\n"
            "@rlm.remote\n"
            "def ratio(a: float, b: float) -> float:\n"
            "    return a / b if b else math.copysign(math.inf, a) if a else math.nan\n"
            "@rlm.remote\n"
            "async def later(n: int) -> list[float]:\n"
            "    import asyncio\n"
            "    await asyncio.sleep(0)\n"
            "    return [float(n)] * n\n"
            "@rlm.remote\n"
            "async def nested() -> dict:\n"
            "    return {'deep': [1.0, {'x': math.inf}]}\n"
        )
        for args, text in (({"a": 0.0, "b": 0.0}, "nan"), ({"a": 1.0, "b": 0.0}, "inf")):
            failed = await host.answer("ratio", args)  # `strict` refused any NaN in the frame itself
            assert (failed["status"], failed["reason"]) == ("error", "unencodable"), failed
            assert "NaN or Infinity" in failed["message"]
            assert "result" not in failed, text
        deep = await host.answer("nested", {})
        assert (deep["status"], deep["reason"]) == ("error", "unencodable")
        wrong_arguments: list[tuple[dict[str, Any], str]] = [
            ({"n": 2, "m": 1}, "TypeError: later() got an unexpected keyword argument 'm'"),
            ({}, "TypeError: later() missing 1 required positional argument: 'n'"),
            ({"n": 1.5}, "TypeError: later() argument 'n': Expected `int`, got `float`"),
        ]
        for args, message in wrong_arguments:
            wrong = await host.answer("later", args)
            assert (wrong["status"], wrong["reason"], wrong["message"]) == ("error", "bad_arguments", message)
        # The kernel keeps working: a cell, then calls of both kinds.
        assert (await host.cell("6 * 7"))["result"] == "42"
        assert (await host.answer("later", {"n": 2}))["result"] == [2.0, 2.0]
        assert (await host.answer("ratio", {"a": 1.0, "b": 4.0}))["result"] == 0.25
        # Not JSON at all (a set): unencodable too.
        await host.cell("@rlm.remote\ndef odd() -> set:\n    return {1}\n")
        odd = await host.answer("odd", {})
        assert (odd["reason"], odd["message"]) == (
            "unencodable",
            "the result is not JSON: TypeError: Object of type set is not JSON serializable",
        )

    with_stub(scenario)


# ---- the call lane ------------------------------------------------------------------------------------------------


def test_calls_are_started_by_stdins_owner_while_a_cell_holds_the_loop() -> None:
    """The reader thread owns the protocol's stdin and starts each call itself: a sync function answers while a
    synchronous cell holds the kernel's loop, and can be what lets the cell go; an async one needs the loop, so it
    answers only once the cell lets it go."""

    async def scenario(host: StubHost) -> None:
        await host.cell(
            "import threading\n"
            "gate = threading.Event()\n"
            "@rlm.remote\n"
            "def ping() -> str:\n"
            "    return 'pong'\n"
            "@rlm.remote\n"
            "def release() -> str:\n"
            "    gate.set()\n"
            "    return 'released'\n"
            "@rlm.remote\n"
            "async def on_the_loop() -> str:\n"
            "    return 'loop'\n"
        )
        host.kernel.send(
            {"request": "execute", "id": "held", "code": "print('holding')\nwent_on = gate.wait(60)\nwent_on"}
        )
        await host.kernel.until_frame(lambda f: f["event"] == "stdout" and f["id"] == "held")  # it holds the loop
        queued = host.call("on_the_loop", {})  # an async def needs the loop the cell holds
        assert (await host.answer("ping", {}))["result"] == "pong"  # answered while the cell holds the loop
        assert host.dones == {}  # neither the cell nor the async call has ended
        freed = host.call("release", {})
        assert (await host.done(freed))["result"] == "released"
        assert (await host.done("held"))["status"] == "ok"
        held = next(f for f in host.kernel.frames if f["event"] == "result" and f["id"] == "held")
        assert held["repr"] == "True"  # the cell went on because a call ran while it held the loop
        assert (await host.done(queued))["result"] == "loop"
        done_order = [f["id"] for f in host.kernel.frames if f["event"] == "done"]
        assert done_order.index("held") < done_order.index(queued)  # the async call waited for the loop
        # The same without a cell in the way.
        assert (await host.answer("on_the_loop", {}))["result"] == "loop"

    with_stub(scenario)


def test_a_remote_function_reading_stdin_gets_eof_and_the_protocol_keeps_its_stdin() -> None:
    """fd 0 of cells and remote functions is /dev/null: only the reader thread reads the protocol's stdin, so a
    function that reads input ends at EOF and steals no request."""

    async def scenario(host: StubHost) -> None:
        await host.cell(
            "import sys\n"
            "@rlm.remote\ndef ask() -> str:\n    return input()\n"
            "@rlm.remote\ndef slurp() -> str:\n    return sys.stdin.read()\n"
        )
        asked = await host.answer("ask", {})
        assert (asked["reason"], asked["message"]) == ("raised", "EOFError: EOF when reading a line")
        assert (await host.answer("slurp", {}))["result"] == ""
        assert (await host.cell("input_ok = True\ninput_ok"))["result"] == "True"
        assert (await host.answer("slurp", {}))["result"] == ""

    with_stub(scenario)


def test_an_interrupt_naming_an_async_call_cancels_it_and_what_a_call_prints_is_its_own() -> None:
    async def scenario(host: StubHost) -> None:
        await host.cell(
            "import asyncio\n"
            "@rlm.remote\n"
            "async def forever() -> None:\n"
            "    print('waiting')\n"
            "    await asyncio.Event().wait()\n"
        )
        host.kernel.send({"request": "execute", "id": "busy", "code": "await asyncio.sleep(3600)"})
        call = host.call("forever", {})
        printed = await host.kernel.until_frame(lambda f: f["event"] == "stdout")
        assert printed == {"event": "stdout", "id": call, "text": "waiting\n"}  # the call's, not the running cell's
        host.kernel.send({"request": "interrupt", "id": "i1", "target": call})
        cancelled = await host.done(call)
        assert (cancelled["status"], cancelled["reason"]) == ("error", "cancelled")
        assert (await host.done("i1"))["found"] is True
        host.kernel.send({"request": "interrupt", "id": "i2", "target": "busy"})
        assert (await host.done("busy"))["status"] == "interrupted"
        host.kernel.send({"request": "interrupt", "id": "i3", "target": call})  # ended: nothing to find
        assert (await host.done("i3"))["found"] is False

        # An interrupt that comes before the call's task is made (a sync cell holds the loop) still cancels it.
        await host.cell(
            "import threading\ngate = threading.Event()\n@rlm.remote\ndef let_go() -> None:\n    gate.set()\n"
        )
        host.kernel.send({"request": "execute", "id": "held", "code": "print('holding')\ngate.wait(60)"})
        await host.kernel.until_frame(lambda f: f["event"] == "stdout" and f["id"] == "held")
        early = host.call("forever", {})
        host.kernel.send({"request": "interrupt", "id": "i4", "target": early})
        assert (await host.done("i4"))["found"] is True
        assert (await host.answer("let_go", {}))["status"] == "ok"
        assert (await host.done("held"))["status"] == "ok"
        never = await host.done(early)
        assert (never["status"], never["reason"]) == ("error", "cancelled")
        assert "before it started" in never["message"]
        assert not any(f["event"] == "stdout" and f["id"] == early for f in host.kernel.frames)  # it never ran

    with_stub(scenario)


def test_a_result_over_the_payload_limit_is_refused_and_the_kernel_goes_on() -> None:
    async def scenario(host: StubHost) -> None:
        await host.cell("@rlm.remote\ndef big(n: int) -> str:\n    return 'x' * n\n")
        too_big = await host.answer("big", {"n": 17 * 1024 * 1024})
        assert (too_big["reason"], too_big["status"]) == ("over_limit", "error")
        assert "16 MiB" in too_big["message"]
        assert (await host.answer("big", {"n": 3}))["result"] == "xxx"

    with_stub(scenario)


def test_the_decorator_fails_when_the_host_refuses_and_keeps_nothing() -> None:
    async def scenario(host: StubHost) -> None:
        host.kernel.send(
            {
                "request": "execute",
                "id": "c0",
                "code": "try:\n    @rlm.remote\n    def f() -> int:\n        return 1\n"
                "except Exception as e:\n    out = (type(e).__name__, e.code)\nout",
            }
        )
        request = await host.kernel.until_frame(lambda f: f["event"] == "host_request")
        error = {"code": "unserved", "message": "the host serves no request of type 'remote.register'"}
        host.kernel.send({"request": "host_reply", "id": request["id"], "status": "error", "error": error})
        shown = await host.kernel.until_frame(lambda f: f["event"] == "result")
        assert shown["repr"] == "('HostRequestError', 'unserved')"
        refused = await host.answer("f", {})
        assert refused["reason"] == "unknown"

    with_stub(scenario)


def test_the_stub_answers_frames_in_any_order_of_calls() -> None:
    """Many calls at once, each on its own thread: one `done` each, matched by id."""

    async def scenario(host: StubHost) -> None:
        await host.cell("@rlm.remote\ndef echo(n: int) -> int:\n    return n\n")
        ids = {host.call("echo", {"n": n}): n for n in range(50)}
        seen = {call: (await host.done(call))["result"] for call in ids}
        assert seen == ids
        await host.cell("1")
        assert host.dones == {}  # exactly one `done` each

    with_stub(scenario)
