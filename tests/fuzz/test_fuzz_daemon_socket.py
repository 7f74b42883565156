"""Fuzz the daemon socket (docs/testing.md): random bytes, random JSON, and valid requests with one field changed so
that they are refused. The daemon stays up, every reply is a typed error (a catalogue code, never `internal`) under
the request's id (or null), and no journal changes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from eukhe.daemon.client import DaemonClient
from eukhe.daemon.wire import MAX_LINE_READ_BYTES
from eukhe.errors import CATALOGUE
from tests.fuzz.budget import fuzz_for
from tests.fuzz.test_fuzz_frame_reader import random_value
from tests.real.conftest import DaemonEnv
from tests.unit.test_schemas import VALID

pytestmark = pytest.mark.real

OPS = sorted(VALID)
WRONG_TYPES: list[Any] = [None, True, 1.5, [], {}, [1], {"x": 1}, -1, "x"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("main.jsonl"))}


def refused_request(rng: random.Random, session: str) -> dict[str, Any]:
    """A valid request with one field changed so that the daemon must refuse it."""
    op = rng.choice(OPS)
    args = {**VALID[op]}
    if "session" in args:
        args["session"] = session
    request: dict[str, Any] = {"v": 1, "id": rng.randint(1, 10**6), "op": op, "args": args}
    how = rng.randrange(7)
    if how == 0:
        request["v"] = rng.choice([0, 2, "1", None, 1.5])
    elif how == 1:
        request["op"] = rng.choice([o for o in (op.upper(), op + "x", "", op.replace(".", "_"), "nope") if o != op])
    elif how == 2:
        request[rng.choice(["extra", "V", "args2", "opp"])] = random_value(rng)
    elif how == 3:
        request["args"] = rng.choice([None, [], "x", 3, True])
    elif how == 4 and args:
        required = [name for name in args if name in REQUIRED.get(op, ())]
        if required:
            del args[rng.choice(required)]
        else:  # nothing to take away: an unknown field instead
            args["not_a_field"] = 1
    elif how == 5 and args:
        name = rng.choice(sorted(args))
        args[name] = rng.choice(
            [t for t in WRONG_TYPES if type(t) is not type(VALID[op][name]) and not _fits(op, name, t)]
        )
    else:
        args[rng.choice(["budgetMs", "sessionId", "unknown", "x"])] = random_value(rng)
    if rng.random() < 0.2:
        request["id"] = rng.choice([None, 1.5, [], {}, "y" * 200])  # an id the reply cannot carry
    return request


REQUIRED: dict[str, tuple[str, ...]] = {
    op: tuple(
        name
        for name in args
        if name
        not in (
            "budget_ms",
            "timeout_ms",
            "offset",
            "limit",
            "glob",
            "path",
            "force",
            "workspace",
            "names",
            "entry",
            "dry_run",
            "args",
        )
    )
    for op, args in VALID.items()
}
"""The fields whose removal a request cannot survive (the others have defaults)."""


def _fits(op: str, name: str, value: Any) -> bool:
    """Whether a replacement value would still be valid (then it is not a refusal)."""
    optional_null = {"budget_ms", "timeout_ms", "limit", "offset", "glob", "names", "entry"}
    if value is None and name in optional_null:
        return True
    if name == "request" and isinstance(value, int | str) and not isinstance(value, bool):
        return True
    return isinstance(value, str) and isinstance(VALID[op][name], str)


def one_line(rng: random.Random, session: str) -> bytes:
    kind = rng.random()
    if kind < 0.3:
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 400)))
        if rng.random() < 0.02:
            data += b"x" * MAX_LINE_READ_BYTES  # past the line limit
        return data.replace(b"\n", b" ") + b"\n"
    if kind < 0.55:
        return json.dumps(random_value(rng)).encode() + b"\n"
    return json.dumps(refused_request(rng, session)).encode() + b"\n"


def test_fuzzed_requests_get_typed_errors_and_change_no_journal(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("bash", "--session", session, "--", "echo before")
    sessions = world.agent_dir / "sessions"
    before = snapshot(sessions)
    with DaemonClient.connect(world.socket) as client:

        def case(rng: random.Random) -> None:
            line = one_line(rng, session)
            client.send_raw(line)
            reply = client.read_reply()
            assert reply.get("ok") is False, (line[:300], reply)
            error = reply["error"]
            assert error["code"] in CATALOGUE, reply
            assert error["code"] != "internal", (line[:300], reply)
            assert isinstance(error["message"], str), reply
            try:
                sent = json.loads(line)
            except ValueError:
                sent = None
            if isinstance(sent, dict) and isinstance(sent.get("id"), int) and not isinstance(sent.get("id"), bool):
                assert reply["id"] in (sent["id"], None), (line[:300], reply)

        count = fuzz_for(case, at_least=50)
        assert client.call("ping")["pong"] is True
    assert snapshot(sessions) == before, "a refused request changed a journal"
    assert world.json("bash", "--session", session, "--", "echo after")["output"]["text"] == "after\n"
    assert count >= 50
