"""A worker answers only about the session it serves: asked about another (the one it served before a fork, or any
other id), it refuses with `wrong_session` naming the id; a fork's answer is read as a record and the worker goes on
under the fork's id."""

from __future__ import annotations

from pathlib import Path

import pytest

from eukhe.daemon.client import DaemonClient, DaemonError
from eukhe.records.daemon import DaemonStatus, WorkerRow
from eukhe.records.jobs import Rewound
from tests.real.conftest import DaemonEnv
from tests.real.test_daemon_cli import typed


def worker_of(world: DaemonEnv, session: str) -> WorkerRow:
    status = typed(DaemonStatus, world.json("daemon", "status"))
    (row,) = [row for row in status.workers if row.session == session]
    return row


def refusal(socket: str, session: str) -> DaemonError:
    with DaemonClient.connect(socket) as client, pytest.raises(DaemonError) as refused:
        client.call("session.ping", {"session": session})
    return refused.value


def test_a_worker_refuses_a_request_about_another_session_naming_its_id(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    row = worker_of(world, session)
    with DaemonClient.connect(row.socket) as client:
        assert client.call("session.ping", {"session": session})["session"] == session
    error = refusal(row.socket, "0123456789ab")
    assert (error.code, error.field) == ("wrong_session", "args.session")
    assert error.details() == {"session": "0123456789ab", "serves": session}
    assert "0123456789ab" in str(error)


def test_after_a_fork_the_worker_serves_the_fork_and_refuses_the_session_it_left(
    world: DaemonEnv, tmp_path: Path
) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    before = worker_of(world, session)
    forked = typed(Rewound, world.json("tree", "fork", "--session", session, "none"))
    assert forked.session != session
    after = worker_of(world, forked.session)
    assert (after.pid, after.socket) == (before.pid, before.socket)  # the supervisor read the fork's id
    error = refusal(before.socket, session)
    assert error.code == "wrong_session"
    assert error.details() == {"session": session, "serves": forked.session}
    assert world.json("session", "show", session)["id"] == session  # reopened in a fresh worker
