"""What a worker hosts: one open session, answering the session-scoped requests (S2 via the Session API).

`open_host` opens (or creates) the session in the worker's working directory; `SessionHost.handle` answers one
request; `close` ends the session's jobs. `list_sessions` and `saved_cwd` read the saved sessions for the supervisor.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Protocol

from eukhe.daemon.protocol import JSON, Request
from eukhe.daemon.server import EventSink, RequestError
from eukhe.paths import sessions_root
from eukhe.private_fs import create_private_file, make_private_dirs

SESSION_OPS = frozenset(
    {
        "session.ping",
        "session.show",
        "bash",
        "jobs.list",
        "jobs.wait",
        "jobs.cancel",
        "watch",
        "tree.navigate",
        "tree.fork",
    }
)
"""The requests the supervisor forwards to a session's worker (each names its `session`)."""


class SessionHost(Protocol):
    """The session a worker serves."""

    @property
    def session_id(self) -> str: ...

    async def handle(self, request: Request, emit: EventSink) -> JSON:
        """Answer one session-scoped request; raise RequestError (or another EukheError) to refuse it."""
        ...

    async def close(self) -> None:
        """End the session's running jobs and release its files."""
        ...


class NoSuchSessionError(RequestError):
    """No saved session has this id."""

    def __init__(self, session_id: str) -> None:
        super().__init__("no_such_session", f"no session {session_id!r}")
        self.session_id = session_id


def _meta_path(session_id: str) -> Path:
    return sessions_root() / session_id / "daemon-session.json"


def _valid_id(session_id: str) -> bool:
    return bool(session_id) and all(c.isalnum() or c in "-_" for c in session_id) and len(session_id) <= 64


def saved_cwd(session_id: str) -> str:
    """The working dir a saved session recorded; NoSuchSessionError if there is no such session."""
    if not _valid_id(session_id):
        raise NoSuchSessionError(session_id)
    try:
        meta = json.loads(_meta_path(session_id).read_text())
    except (OSError, json.JSONDecodeError):
        raise NoSuchSessionError(session_id) from None
    return str(meta["cwd"])


def list_sessions() -> list[dict[str, JSON]]:
    """Every saved session: id and cwd, in id order."""
    root = sessions_root()
    found: list[dict[str, JSON]] = []
    if not root.is_dir():
        return found
    for entry in sorted(root.iterdir()):
        try:
            found.append({"id": entry.name, "cwd": saved_cwd(entry.name)})
        except NoSuchSessionError:
            continue
    return found


class PingHost:
    """A stand-in session (until the Session API is wired): it records its cwd and answers `session.ping`."""

    def __init__(self, session_id: str, cwd: Path) -> None:
        self._id = session_id
        self.cwd = cwd

    @property
    def session_id(self) -> str:
        return self._id

    async def handle(self, request: Request, emit: EventSink) -> JSON:
        if request.op == "session.ping":
            return {"session": self._id, "pid": os.getpid(), "cwd": str(self.cwd)}
        raise RequestError("unknown_op", f"unknown request {request.op!r}")

    async def close(self) -> None:
        return None


async def open_host(session_id: str | None, cwd: Path) -> SessionHost:
    """Open the saved session `session_id`, or create a new one in `cwd` when it is None."""
    if session_id is None:
        session_id = secrets.token_hex(8)
        directory = make_private_dirs(sessions_root() / session_id)
        fd = create_private_file(_meta_path(session_id))
        with os.fdopen(fd, "w") as meta:
            json.dump({"cwd": str(cwd)}, meta)
        del directory
    else:
        saved_cwd(session_id)
        os.chmod(sessions_root() / session_id, 0o700)
    return PingHost(session_id, cwd)
