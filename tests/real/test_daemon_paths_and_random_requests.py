"""Paths a client gives the daemon, and random requests: every answer is a typed error or a result, never
`internal`.

- A `session.create` cwd must be absolute: the daemon's own directory means nothing to the client (`ws` or `.`
  would be sessions in the daemon's directory). The CLI resolves a relative --cwd against its own directory first.
- An OS error on a path the client gave (ENAMETOOLONG, ELOOP, a NUL byte) is `bad_path` naming the path, never
  `internal` with the Python exception text. (EACCES cannot be made for root, who runs this suite: root passes every
  permission check.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eukhe.daemon.client import DaemonClient
from tests.real.conftest import DaemonEnv, make_env
from tests.unit.test_schemas import VALID

pytestmark = pytest.mark.real


def ask(client: DaemonClient, request_id: int, op: str, args: dict[str, Any]) -> dict[str, Any]:
    client.send_raw(json.dumps({"v": 1, "id": request_id, "op": op, "args": args}).encode() + b"\n")
    reply = client.read_reply()
    while "event" in reply:  # a call's `started` event comes before its reply
        assert reply["id"] == request_id
        reply = client.read_reply()
    assert reply["id"] == request_id
    return reply


def test_a_relative_cwd_is_refused_by_name_and_os_errors_on_paths_are_typed(world: DaemonEnv, tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    os.symlink(loop, loop)  # a symlink to itself: ELOOP
    world.json("daemon", "start")
    with DaemonClient.connect(world.socket) as client:
        for number, cwd in enumerate(["ws", ".", "a/b"]):
            error = ask(client, number, "session.create", {"cwd": cwd})["error"]
            assert (error["code"], error["field"]) == ("working_dir_error", "args.cwd")
            assert error["message"] == f"working directory must be an absolute path: {cwd!r}"
        for number, cwd in enumerate(["/" + "x" * 5000, "/tmp/a\x00b", str(loop), str(loop / "below")], start=10):
            error = ask(client, number, "session.create", {"cwd": cwd})["error"]
            assert (error["code"], error["field"]) == ("bad_path", "args.cwd"), error
            assert repr(cwd)[:40] in error["message"] or cwd[:40] in error["message"]
        assert client.call("ping")["pong"] is True


OPS = sorted(set(VALID) - {"stop", "watch", "tree.fork"})
"""Random requests over every op but those that end the daemon or the connection, or replace the session."""

paths = st.one_of(
    st.text(max_size=20),
    st.text(max_size=3).map(lambda s: "/tmp/" + s),
    st.integers(100, 5000).map(lambda n: "/" + "y" * n),
    st.just("/tmp/\x00"),
)
anything = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.text(max_size=8), paths)


@st.composite
def requests(draw: st.DrawFn, session: str) -> tuple[str, dict[str, Any]]:
    op = draw(st.sampled_from(OPS))
    args: dict[str, Any] = dict(VALID[op])
    if "session" in args:
        args["session"] = draw(st.one_of(st.just(session), st.text(max_size=14), paths))
    if "cwd" in args:
        args["cwd"] = draw(paths)
    if "command" in args:
        args["command"] = draw(st.sampled_from(["true", "echo hi", "exit 3", "printf '\\377'"]))
    if "code" in args:
        args["code"] = draw(st.sampled_from(["1", "raise ValueError('x')", "float('nan')"]))
    for name in ("budget_ms", "timeout_ms"):
        if name in args:
            args[name] = draw(st.one_of(st.none(), st.integers(0, 200)))
    if "entry" in args:
        args["entry"] = draw(st.one_of(st.none(), st.text(max_size=8)))
    if "job" in args:
        args["job"] = draw(st.text(max_size=12))
    if draw(st.booleans()):  # one field retyped or added
        args[draw(st.sampled_from([*args, "extra"]))] = draw(anything)
    return op, args


def test_random_requests_never_answer_internal(tmp_path_factory: pytest.TempPathFactory) -> None:
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ek", dir="/tmp"))
    world = make_env(root)
    project = root / "project"
    project.mkdir()
    try:
        session = world.json("session", "create", "--cwd", str(project))["id"]
        with DaemonClient.connect(world.socket) as client:
            counter = iter(range(10**9))

            @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
            @given(requests(session))
            def one(request: tuple[str, dict[str, Any]]) -> None:
                op, args = request
                reply = ask(client, next(counter), op, args)
                if not reply.get("ok"):
                    assert reply["error"]["code"] != "internal", (op, args, reply)

            one()
            assert client.call("ping")["pong"] is True
    finally:
        left = world.stop()
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    assert not left
