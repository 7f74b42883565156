"""A request that a dying worker never read is sent again; one it read before it died is `worker_died`.

A killed worker closes its sockets one by one. The supervisor can see the end of a connection and still reach the
worker's listening socket: its next request is then queued on a socket that closes a moment later, unread. The
kernel tells the two apart: a closing socket that leaves bytes unread (or a connection never accepted) resets its
peer, one whose bytes were all read ends with EOF. The supervisor's forward and the MCP server's direct link both
read a reset before any reply as "not taken" (safe to send again), and EOF as the worker's death mid-request.
Real Unix sockets; the test plays the worker's side: it accepts, waits until the request's bytes arrive, and closes.
"""

from __future__ import annotations

import asyncio
import select
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eukhe.daemon.protocol import Request
from eukhe.daemon.server import NO_EVENTS, RequestError
from eukhe.daemon.supervisor import Supervisor, Worker, WorkerUnreachableError
from eukhe.mcp.link import DaemonLink, NotTakenError, _Pool

pytestmark = pytest.mark.real

DEADLINE_S = 60.0


@dataclass
class GoneProcess:
    """The worker's process as the forward sees it: it reads neither (the socket is what is tested)."""

    pid: int = 0
    returncode: int | None = None


def listening(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    return listener


async def peer_ends(listener: socket.socket, *, read_first: bool) -> None:
    """Accept one connection, wait (bounded) until its request arrived, then close it: having read the request or
    leaving it unread."""

    def end() -> None:
        readable, _, _ = select.select([listener], [], [], DEADLINE_S)
        assert readable, "a connection"
        connection, _ = listener.accept()
        readable, _, _ = select.select([connection], [], [], DEADLINE_S)
        assert readable, "the request's bytes"
        if read_first:
            assert connection.recv(1 << 16).endswith(b"\n")
        connection.close()

    await asyncio.to_thread(end)


def error_when_the_peer_ends(path: Path, ask: Callable[[], Awaitable[Any]], *, read_first: bool) -> BaseException:
    """What `ask()` (a request to the socket at `path`) raises when its peer ends having read it, or not."""

    async def scenario() -> BaseException:
        with listening(path) as listener:
            asked = asyncio.ensure_future(ask())
            await peer_ends(listener, read_first=read_first)
            with pytest.raises(Exception) as raised:
                await asked
            return raised.value

    return asyncio.run(asyncio.wait_for(scenario(), DEADLINE_S))


@pytest.mark.parametrize("read_first", [False, True], ids=["unread", "read"])
def test_the_supervisor_sends_again_only_a_request_its_dying_worker_left_unread(
    tmp_path: Path, read_first: bool
) -> None:
    path = tmp_path / "w.sock"

    async def forward() -> Any:
        supervisor = Supervisor(tmp_path / "daemon.sock")
        worker = Worker("s", str(tmp_path), path, GoneProcess(), 0, 0)  # type: ignore[arg-type]
        supervisor.workers["s"] = worker
        return await supervisor.forward(worker, Request(id=1, op="jobs.list", args={"session": "s"}), NO_EVENTS)

    error = error_when_the_peer_ends(path, forward, read_first=read_first)
    assert isinstance(error, RequestError), error
    if read_first:
        assert not isinstance(error, WorkerUnreachableError)
        assert error.code == "worker_died"
    else:
        assert isinstance(error, WorkerUnreachableError)
        assert error.code == "worker_unavailable"
        assert "before it read the request" in str(error)


@pytest.mark.parametrize("read_first", [False, True], ids=["unread", "read"])
def test_the_mcp_link_sends_a_direct_call_its_worker_left_unread_through_the_supervisor(
    tmp_path: Path, read_first: bool
) -> None:
    path = tmp_path / "w.sock"
    link = DaemonLink(str(tmp_path / "daemon.sock"))

    async def call() -> Any:
        try:
            return await link._request(_Pool(str(path)), "tool.call", {"session": "s"}, direct=True)
        finally:
            await link.aclose()

    error = error_when_the_peer_ends(path, call, read_first=read_first)
    if read_first:
        assert not isinstance(error, NotTakenError)
        assert getattr(error, "code", None) == "worker_died"
    else:
        assert isinstance(error, NotTakenError)
