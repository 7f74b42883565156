"""Children under the daemon: each child is a session of its own worker.

A parent's worker asks the supervisor to create the child's session (a new worker, in the child's directory), to
run the child's code there (`child.run`, answered by the child's worker), and to close it (`session.close` with
force: its worker ends, with its kernel and jobs; the session stays on disk and reopens when asked).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eukhe.children import AgentSession
from eukhe.children.family import AgentSessions, agent_parts
from eukhe.daemon.asking import ask
from eukhe.daemon.replies import DaemonError, DaemonProtocolError
from eukhe.records.children import RunEnd, RunRequest
from eukhe.records.daemon import Pong, SessionClosed, SessionCreated
from eukhe.records.sandbox import SandboxChoice, SandboxPolicy


class DaemonHost:
    """A `ChildHost` whose children are sessions of the daemon at `socket`, each in its own worker."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    async def start(self, cwd: Path, sandbox: SandboxPolicy) -> str:
        created = await ask(
            self.socket, "session.create", {"cwd": str(cwd), "policy": sandbox.to_json()}, SessionCreated
        )
        return created.id

    async def run(self, session_id: str, request: RunRequest, on_message: Callable[[str], None]) -> RunEnd:
        args = {"session": session_id, **request.to_json()}

        def heard(event: Any) -> None:
            if isinstance(event, dict) and isinstance(event.get("message"), str):
                on_message(event["message"])

        return await ask(self.socket, "child.run", args, RunEnd, on_event=heard)

    async def stop(self, session_id: str) -> None:
        await ask(self.socket, "session.close", {"session": session_id, "force": True}, SessionClosed)

    async def stopping(self) -> bool:
        """The daemon is stopping when it no longer answers a ping (its listener closes before its workers stop).
        Anything else (this process out of descriptors, a connection broken mid-ping) is not a sign of it: a child
        taken for one whose host goes away would never end in this parent's life."""
        try:
            await ask(self.socket, "ping", {}, Pong)
        except (DaemonError, DaemonProtocolError) as error:
            return error.code in STOPPING
        except OSError:
            return False
        return False


STOPPING = frozenset({"daemon_unavailable", "daemon_stopping", "daemon_protocol"})
"""The codes of a daemon that is going away."""


class DaemonSessions:
    """The sessions a worker hosts: agent sessions whose children are sessions of the daemon at `socket`."""

    def __init__(self, socket: Path) -> None:
        self._parts = agent_parts(DaemonHost(socket))

    async def create(
        self, cwd: str | os.PathLike[str] | None, *, sandbox: SandboxPolicy | SandboxChoice | None = None
    ) -> AgentSession:
        return await AgentSession.create(cwd, sandbox=sandbox, parts=self._parts)

    async def open(self, session_id: str, *, cwd: str | os.PathLike[str] | None = None) -> AgentSession:
        return await AgentSession.open(session_id, cwd=cwd, parts=self._parts)


def daemon_children(socket: Path) -> AgentSessions:
    """What a worker makes its session with: its children are the daemon's sessions."""
    return DaemonSessions(socket)
