"""`@remote` on a session's real kernel (spec S3 "@remote"; the spec's `kernel_remote`): register, call; raising,
unknown, hanging functions; a NaN result; wrong arguments to an async function; then cells and calls still work;
the call lane (a call answers while a cell sleeps, a cell runs while a call hangs); a kernel exiting or restarting
mid-call answers `unreachable` at once; the bound, the output limits, and the `dyn` entry.

Every session runs on a VirtualClock: a call's bound passes only when the test moves the clock, so `timeout` comes
exactly at the bound and `unreachable` provably before it. Only real events are awaited (bounded polling).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from eukhe.api import RemoteCallAnswer, RemoteCallError, Session, SessionSettings, Settled
from eukhe.clock import VirtualClock
from eukhe.errors import InputError
from eukhe.kernel.session_kernel import KernelSession
from eukhe.records.settings import Limits
from tests.real.kernel_support import process_gone, run, until

pytestmark = pytest.mark.real

BUDGET_MS = 300
"""The sessions' blocking budget (virtual milliseconds)."""

DEFINITIONS = """\
import asyncio, math, os, threading, time

started = threading.Event()   # a hanging function has begun
release = threading.Event()   # what lets it go (never set by the test: the thread is the call's cost)

@rlm.remote
def add(a: int, b: int) -> int:
    "Add two integers."
    return a + b

@rlm.remote
def boom(text: str = "boom") -> None:
    raise ValueError(text)

@rlm.remote
def hang() -> None:
    started.set()
    release.wait()

@rlm.remote
def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan

@rlm.remote
async def later(n: int) -> list[int]:
    await asyncio.sleep(0)
    return list(range(n))
"""


async def cell(session: Session, code: str) -> Settled:
    """A cell that settles without error (the virtual budget never passes on its own)."""
    answer = await session.ipython(code, budget_ms=30_000)
    assert isinstance(answer, Settled), answer
    assert answer.error is None, answer.error
    return answer


async def refused(call: Awaitable[Any], kind: str, reason: str | None = None) -> RemoteCallError:
    """The call raises RemoteCallError of that kind (and reason)."""
    with pytest.raises(RemoteCallError) as caught:
        await call
    error = caught.value
    assert (error.kind, error.reason) == (kind, reason), error
    assert error.answer().to_json() == {"error": {"kind": kind, "message": error.message, "reason": reason}}
    return error


async def times_out_exactly_at(clock: VirtualClock, call: asyncio.Task[Any], budget_ms: int) -> RemoteCallError:
    """The call (already waiting in the kernel) is not answered one virtual ms before `budget_ms`, and is answered
    `timeout` at it."""
    await until(lambda: clock.pending() > 0, what="the call's bound on the clock")
    clock.advance(budget_ms - 1)
    await asyncio.sleep(0.05)  # a real pause: an answer that came early would be here by now
    assert not call.done(), call
    clock.advance(1)
    return await refused(call, "timeout")


def scenario_in(
    tmp_path: Path, body: Callable[[KernelSession, VirtualClock], Awaitable[None]], **settings: Any
) -> None:
    work = tmp_path / "work"
    work.mkdir()

    async def scenario() -> None:
        clock = VirtualClock()
        session = await Session.create(
            work,
            root=tmp_path / "sessions",
            clock=clock,
            settings=SessionSettings(tool_blocking_budget_ms=BUDGET_MS, **settings),
        )
        try:
            await body(session, clock)
        finally:
            await session.close()

    run(scenario())


def test_remote_register_call_and_typed_errors(tmp_path: Path) -> None:
    async def body(session: KernelSession, clock: VirtualClock) -> None:
        remote = session.remote
        await refused(remote.call("add", {"a": 2, "b": 3}), "not_running")  # no cell started a kernel yet
        assert remote.list() == []
        assert session.kernel is None  # a call never starts one

        await cell(session, DEFINITIONS)
        rows = {row.name: row for row in remote.list()}
        assert sorted(rows) == ["add", "boom", "hang", "later", "ratio"]
        add = rows["add"]
        assert (add.tool, add.doc, add.module, add.qualname) == ("remote/add", "Add two integers.", "__main__", "add")
        assert add.schema == {
            "title": "add",
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        }

        assert await remote.call("add", {"a": 2, "b": 3}) == RemoteCallAnswer(result=5)
        assert (await remote.call("add", {"a": 2, "b": 3})).to_json() == {"result": 5}
        raised = await refused(remote.call("boom", {}), "failed", "raised")
        assert raised.message == "ValueError: boom"
        unknown = await refused(remote.call("nope", {}), "unknown")
        assert "no remote function 'nope'" in unknown.message
        nan = await refused(remote.call("ratio", {"a": 1.0, "b": 0.0}), "failed", "unencodable")
        assert "NaN or Infinity" in nan.message
        wrong = await refused(remote.call("later", {"n": 1, "m": 2}), "failed", "bad_arguments")
        assert wrong.message == "TypeError: later() got an unexpected keyword argument 'm'"

        hanging = asyncio.ensure_future(remote.call("hang", {}, budget_ms=10 * BUDGET_MS))
        shown = await cell(session, "started.wait(10)")  # a cell runs while the call hangs
        assert shown.result == "True"
        timeout = await times_out_exactly_at(clock, hanging, BUDGET_MS)  # capped by the session's budget
        assert "did not answer within 300 ms" in timeout.message

        # Then cells and calls still work (the hanging thread goes on; nothing else waits for it).
        assert (await cell(session, "6 * 7")).result == "42"
        assert await remote.call("add", {"a": 20, "b": 22}) == RemoteCallAnswer(result=42)
        assert await remote.call("later", {"n": 3}) == RemoteCallAnswer(result=[0, 1, 2])
        assert await remote.call("ratio", {"a": 1.0, "b": 4.0}) == RemoteCallAnswer(result=0.25)
        assert (await cell(session, "started.is_set(), release.is_set()")).result == "(True, False)"

    scenario_in(tmp_path, body)


def test_a_call_answers_while_a_cell_sleeps_and_a_cell_runs_while_a_call_hangs(tmp_path: Path) -> None:
    async def body(session: KernelSession, clock: VirtualClock) -> None:
        remote = session.remote
        await cell(
            session,
            DEFINITIONS
            + "asleep = threading.Event()\n"
            + "@rlm.remote\ndef awake() -> bool:\n    return asleep.wait(10)\n"
            + "@rlm.remote\nasync def on_the_loop() -> str:\n    return 'loop'\n",
        )
        # A synchronous cell holds the loop: a sync function still answers (on its own thread).
        sleeping = asyncio.ensure_future(session.ipython("asleep.set()\ntime.sleep(3600)", budget_ms=30_000))
        assert await remote.call("awake", {}) == RemoteCallAnswer(result=True)
        assert not sleeping.done()
        manager = session.kernel
        assert manager is not None
        assert await manager.interrupt()
        slept = await sleeping
        assert isinstance(slept, Settled) and slept.outcome == "interrupted"

        # An awaiting cell leaves the loop free: an async def answers too.
        await cell(session, "asleep.clear()")
        sleeping = asyncio.ensure_future(session.ipython("asleep.set()\nawait asyncio.sleep(3600)", budget_ms=30_000))
        assert await remote.call("awake", {}) == RemoteCallAnswer(result=True)
        assert await remote.call("on_the_loop", {}) == RemoteCallAnswer(result="loop")
        assert not sleeping.done()
        assert await manager.interrupt()
        assert (await sleeping).outcome == "interrupted"  # type: ignore[union-attr]

        # A call hangs: cells run, other calls answer, then it times out and the kernel goes on.
        hanging = asyncio.ensure_future(remote.call("hang", {}))
        assert (await cell(session, "started.wait(10)")).result == "True"
        assert (await cell(session, "sum(range(10))")).result == "45"
        assert await remote.call("add", {"a": 1, "b": 2}) == RemoteCallAnswer(result=3)
        assert not hanging.done()
        await times_out_exactly_at(clock, hanging, BUDGET_MS)
        assert (await cell(session, "'after'")).result == "'after'"

    scenario_in(tmp_path, body)


def test_a_kernel_exiting_or_restarting_mid_call_answers_unreachable_at_once(tmp_path: Path) -> None:
    """`unreachable` comes while the virtual clock stands still: not at the end of the bound, which never passes."""

    async def body(session: KernelSession, clock: VirtualClock) -> None:
        remote = session.remote
        leave = "@rlm.remote\ndef leave(code: int) -> None:\n    started.set()\n    os._exit(code)\n"
        await cell(session, DEFINITIONS + leave)
        manager = session.kernel
        assert manager is not None
        first = manager.pid
        assert first is not None

        # The kernel exits in the middle of the call (the function ends the process).
        gone = await refused(remote.call("leave", {"code": 3}), "unreachable")
        assert "stopped before the call's reply" in gone.message and "exited with code 3" in gone.message
        assert clock.now_ms() == 0
        assert remote.list() == []  # the functions went with their kernel
        await refused(remote.call("add", {"a": 1, "b": 1}), "not_running")

        # A fresh kernel (the next cell starts it) knows none of the old functions until they are defined again.
        await cell(session, "1")
        assert manager.pid not in (None, first)
        assert remote.list() == []
        await refused(remote.call("add", {"a": 1, "b": 1}), "unknown")
        await cell(session, DEFINITIONS)
        assert await remote.call("add", {"a": 1, "b": 1}) == RemoteCallAnswer(result=2)

        # The kernel is killed from outside while a call hangs.
        hanging = asyncio.ensure_future(remote.call("hang", {}))
        await cell(session, "started.wait(10)")
        pid = manager.pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)
        killed = await refused(hanging, "unreachable")
        assert "killed by signal 9" in killed.message
        await until(lambda: process_gone(pid), what="the old kernel's end")

        # The session restarts its kernel while a call hangs (a kill: the next cell starts a fresh one).
        await cell(session, DEFINITIONS)
        hanging = asyncio.ensure_future(remote.call("hang", {}))
        await cell(session, "started.wait(10)")
        await asyncio.gather(manager.kill(), refused(hanging, "unreachable"))
        await cell(session, DEFINITIONS)
        assert await remote.call("later", {"n": 2}) == RemoteCallAnswer(result=[0, 1])
        assert clock.now_ms() == 0  # no answer above waited for the bound

    scenario_in(tmp_path, body)


def test_an_async_call_past_its_bound_or_cancelled_is_cancelled_in_the_kernel(tmp_path: Path) -> None:
    async def body(session: KernelSession, clock: VirtualClock) -> None:
        remote = session.remote
        await cell(
            session,
            "import asyncio\n"
            "ended = []\n"
            "@rlm.remote\n"
            "async def stuck(tag: str) -> None:\n"
            "    try:\n"
            "        print('waiting', tag)\n"
            "        await asyncio.Event().wait()\n"
            "    finally:\n"
            "        ended.append(tag)\n"
            "async def until_ended(n):\n"
            "    while len(ended) < n:\n"
            "        await asyncio.sleep(0.005)\n"
            "    return ended\n",
        )
        manager = session.kernel
        assert manager is not None

        def began(tag: str) -> Callable[[], bool]:  # what a remote function prints is the kernel's background output
            return lambda: f"waiting {tag}".encode() in manager.background.snapshot().text

        waiting = asyncio.ensure_future(remote.call("stuck", {"tag": "bound"}, budget_ms=50))
        await until(began("bound"), what="the function's start")
        await times_out_exactly_at(clock, waiting, 50)
        shown = await cell(session, "await asyncio.wait_for(until_ended(1), 10)")
        assert shown.result == "['bound']"  # the kernel cancelled the task when the host stopped waiting

        cancelled = asyncio.ensure_future(remote.call("stuck", {"tag": "cancel"}))
        await until(began("cancel"), what="the function's start")
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        shown = await cell(session, "await asyncio.wait_for(until_ended(2), 10)")
        assert shown.result == "['bound', 'cancel']"

    scenario_in(tmp_path, body)


def test_the_answers_keep_the_sessions_output_limits(tmp_path: Path) -> None:
    async def body(session: KernelSession, clock: VirtualClock) -> None:
        remote = session.remote
        await cell(
            session,
            "@rlm.remote\ndef numbers(n: int) -> list[int]:\n    return list(range(n))\n"
            "@rlm.remote\ndef loud(n: int) -> None:\n    raise ValueError('x' * n)\n",
        )
        small = await remote.call("numbers", {"n": 3})
        assert small.to_json() == {"result": [0, 1, 2]}

        big = await remote.call("numbers", {"n": 1000})
        assert big.to_json().keys() == {"output"}
        window = big.output
        assert not isinstance(window, type(big.result))  # the result is absent, the window stands in for it
        text = json.dumps(list(range(1000)), separators=(",", ":"))
        assert window.bytes_kept <= 200 and window.bytes_kept + window.bytes_dropped == len(text)  # type: ignore[union-attr]
        assert window.notice and window.artifact  # type: ignore[union-attr]
        assert json.loads(Path(window.artifact).read_text()) == list(range(1000))  # type: ignore[union-attr]

        error = await refused(remote.call("loud", {"n": 5000}), "failed", "raised")
        assert len(error.message) < 1000 and "[output truncated" in error.message
        assert error.message.startswith("ValueError: xxx")

        through_dyn = await session.harness.call("dyn", {"tool": "remote/numbers", "args": {"n": 1000}})
        assert through_dyn.status == "returned"
        assert through_dyn.output.bytes_kept <= 200 and through_dyn.output.bytes_dropped > 0

    scenario_in(tmp_path, body, truncation=Limits(max_bytes=200, max_lines=5, keep="head"))


def test_remote_functions_are_reached_through_dyn_and_never_in_the_roster(tmp_path: Path) -> None:
    async def body(session: KernelSession, clock: VirtualClock) -> None:
        harness = session.harness
        remote = session.remote
        early = await harness.call("dyn", {"tool": "remote/add", "args": {"a": 2, "b": 3}})  # before any kernel
        assert (early.status, early.details["error"]["kind"]) == ("failed", "not_running")
        assert harness.dynamic_tools() == []
        await cell(session, DEFINITIONS)
        assert [tool.name for tool in harness.tools()] == ["dyn"]  # the roster: the entry, not what it reaches
        assert [tool.name for tool in harness.dynamic_tools()] == [
            "remote/add",
            "remote/boom",
            "remote/hang",
            "remote/later",
            "remote/ratio",
        ]
        tool = harness.dynamic_tool("remote/add")
        assert (
            tool is not None and tool.parameters == remote.list()[0].schema and tool.description == "Add two integers."
        )

        added = await harness.call("dyn", {"tool": "remote/add", "args": {"a": 2, "b": 3}})
        assert (added.status, added.output.text, added.tool) == ("returned", "5", "dyn")
        entry = session.entry(added.entry_id)
        assert entry.kind == "tool_result" and entry.content["status"] == "returned"

        unknown = await harness.call("dyn", {"tool": "remote/nope", "args": {}})
        assert unknown.status == "failed"
        assert unknown.details["error"]["kind"] == "unknown"
        assert unknown.warnings[-1].startswith("RemoteCallError: unknown: no remote function 'nope'")
        failed = await harness.call("dyn", {"tool": "remote/later", "args": {"n": "three"}})
        assert (failed.status, failed.details["error"]["reason"]) == ("failed", "bad_arguments")
        other = await harness.call("dyn", {"tool": "bash", "args": {}})
        assert other.status == "failed" and other.warnings[-1] == "UnknownToolError: no tool named 'bash'"
        with pytest.raises(InputError) as bad:
            await harness.call("dyn", {"args": {}})
        assert (bad.value.code, bad.value.field) == ("bad_tool_arguments", "tool")

    scenario_in(tmp_path, body)


def test_registering_a_name_again_replaces_it(tmp_path: Path) -> None:
    async def body(session: KernelSession, clock: VirtualClock) -> None:
        remote = session.remote
        await cell(session, "@rlm.remote\ndef f(a: int) -> int:\n    'First.'\n    return a\n")
        await cell(session, "@rlm.remote(name='f')\ndef second(a: str) -> str:\n    'Second.'\n    return a * 2\n")
        (row,) = remote.list()
        assert (row.name, row.qualname, row.doc, row.schema["properties"]) == (
            "f",
            "second",
            "Second.",
            {"a": {"type": "string"}},
        )
        assert await remote.call("f", {"a": "ab"}) == RemoteCallAnswer(result="abab")

    scenario_in(tmp_path, body)
