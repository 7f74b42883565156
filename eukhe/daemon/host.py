"""What a worker hosts: one open `Session` (eukhe.session), answering the session-scoped requests.

`open_host` opens (or creates) the session in the worker's working directory; `SessionHost.handle` turns one
request into a Session API call and its answer into the protocol's result (the keys `eukhe ... --json` prints);
`close` closes the session (its running jobs end). `list_sessions` and `saved_cwd` read saved sessions for the
supervisor without opening them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eukhe.core.jobdocs import JOB_DOC_TYPE
from eukhe.daemon.protocol import JSON, Request
from eukhe.daemon.server import EventSink, RequestError, arg_int, arg_str
from eukhe.errors import EukheError
from eukhe.jobs.bash import BashDetached, BashSettled
from eukhe.kernel.tool import ipython_result
from eukhe.paths import sessions_root
from eukhe.private_fs import open_private_file
from eukhe.session import store
from eukhe.session.journal import read_journal
from eukhe.session.session import Session

SESSION_OPS = frozenset(
    {
        "session.ping",
        "session.show",
        "bash",
        "ipython",
        "jobs.list",
        "jobs.wait",
        "jobs.cancel",
        "watch",
        "tree.navigate",
        "tree.fork",
    }
)
"""The requests the supervisor forwards to a session's worker (each names its `session`)."""

LOCK_NAME = "worker.lock"
"""A file in the session dir that the worker hosting the session holds (flock) while the session is open."""
LOCK_WAIT_ENV = "EUKHE_SESSION_LOCK_WAIT_MS"
LOCK_WAIT_MS = 30_000
"""How long a worker waits for an older worker (one whose supervisor died) to let go of the session."""

WATCH_POLL_S = 0.2
"""How often `watch` looks at the running jobs' output counters (job progress is not on the call board)."""


class NoSuchSessionError(RequestError):
    """No saved session has this id."""

    def __init__(self, session_id: str) -> None:
        super().__init__("no_such_session", f"no session {session_id!r}")
        self.session_id = session_id


def _journal(session_id: str) -> Path:
    try:
        store.check_session_id(session_id)
    except EukheError:
        raise NoSuchSessionError(session_id) from None
    return sessions_root() / session_id / store.JOURNAL_NAME


def saved_header(session_id: str) -> Mapping[str, Any]:
    """The `session` record a saved session starts with; NoSuchSessionError if there is none."""
    path = _journal(session_id)
    try:
        read = read_journal(path)
    except OSError:
        raise NoSuchSessionError(session_id) from None
    for commit in read.commits:
        for record in commit.records:
            if record.get("t") == "session":
                return record
    raise NoSuchSessionError(session_id)


def saved_cwd(session_id: str) -> str:
    """The working dir a saved session recorded."""
    return str(saved_header(session_id).get("cwd") or "")


def list_sessions() -> list[dict[str, JSON]]:
    """Every saved session (id, cwd, where it was forked from), in id order."""
    root = sessions_root()
    found: list[dict[str, JSON]] = []
    if not root.is_dir():
        return found
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or not (entry / store.JOURNAL_NAME).is_file():
            continue
        with contextlib.suppress(NoSuchSessionError):
            header = saved_header(entry.name)
            found.append({"id": entry.name, "cwd": header.get("cwd"), "forkedFrom": header.get("forkedFrom")})
    return found


def _entry_arg(request: Request) -> str | None:
    """The target entry of a rewind: an entry id, or none (null or the word `none`): before every entry."""
    value = request.args.get("entry")
    if value is None or value == "none":
        return None
    if not isinstance(value, str):
        raise RequestError("bad_args", f"{request.op}: `entry` must be an entry id or none")
    return value


def bash_result(outcome: BashSettled | BashDetached) -> dict[str, JSON]:
    """A bash call's answer: `status`, `exit_code` (settled) or `job` (detached), and the bounded-output keys."""
    output = outcome.output.as_json()
    head: dict[str, JSON]
    if isinstance(outcome, BashSettled):
        head = {"status": "settled", "job": outcome.job_id, "exit_code": outcome.exit_code, "killed": outcome.killed}
    else:
        head = {"status": "detached", "job": outcome.job_id, "budget_ms": outcome.budget_ms}
    return head | output


def job_status(described: Mapping[str, Any]) -> dict[str, JSON]:
    """One job as `jobs list` shows it: `id`, `status` (running or ended), `command`, and its end once ended."""
    answer: dict[str, JSON] = {
        "id": described["id"],
        "status": "running" if described["running"] else "ended",
        "command": described["title"],
        "kind": described["kind"],
        "bytes_kept": described["bytesKept"],
        "bytes_dropped": described["bytesDropped"],
    }
    return answer | _end_keys(described.get("end"))


def _end_keys(end: Mapping[str, Any] | None) -> dict[str, JSON]:
    if end is None:
        return {}
    if end.get("killed"):
        return {"killed": True, "exit_code": None}
    return {"killed": False, "exit_code": end.get("exitCode")}


def wait_result(answer: Mapping[str, Any]) -> dict[str, JSON]:
    """`jobs wait` / `jobs cancel`: `status` settled or detached, and once ended `exit_code` or `killed: true`."""
    output = answer.get("output") or {}
    head: dict[str, JSON] = {
        "status": "settled" if answer.get("settled") else "detached",
        "job": answer["id"],
        "command": answer["title"],
        "running": answer["running"],
    }
    return head | _end_keys(answer.get("end")) | dict(output)


class SessionBusyError(RequestError):
    """Another worker still holds the session open (e.g. one left by a supervisor that died, still closing)."""

    def __init__(self, session_id: str) -> None:
        super().__init__("session_busy", f"session {session_id} is still open in another worker; try again")


async def lock_session(session_id: str) -> int:
    """Take the session's worker lock, waiting (bounded) for a previous holder; the locked descriptor."""
    wait_ms = int(os.environ.get(LOCK_WAIT_ENV, LOCK_WAIT_MS))
    fd = open_private_file(sessions_root() / session_id / LOCK_NAME, os.O_RDWR)
    deadline = time.monotonic() + wait_ms / 1000
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SessionBusyError(session_id) from None
                await asyncio.sleep(0.05)  # the holder is closing its session; poll its lock, bounded by the deadline
            else:
                return fd
    except BaseException:  # busy past the deadline, or cancelled while waiting: the descriptor is not leaked
        os.close(fd)
        raise


class SessionHost:
    """The session a worker serves, behind the protocol; it holds the session's worker lock while open."""

    def __init__(self, session: Session, lock_fd: int) -> None:
        self.session = session
        self._lock_fd = lock_fd
        self.watchers = 0  # live `watch` streams (each ends when its client leaves)

    @property
    def session_id(self) -> str:
        """The hosted session's id (after a fork: the fork's, which this worker goes on serving)."""
        return self.session.id

    async def handle(self, request: Request, emit: EventSink) -> JSON:
        """Answer one session-scoped request through the Session API."""
        session, op = self.session, request.op
        if op == "session.ping":
            return {"session": session.id, "pid": os.getpid(), "cwd": str(session.cwd), "watchers": self.watchers}
        if op == "session.show":
            return {
                "id": session.id,
                "cwd": str(session.cwd),
                "leaf": session.leaf,
                "entries": [
                    {"id": e.id, "parent": e.parent, "kind": e.kind, "content": e.content} for e in session.entries()
                ],
                "running_jobs": [job.id for job in session.job_table.running()],
                "job_nodes": sorted(session.view_state().of_type(JOB_DOC_TYPE)),
            }
        if op == "bash":
            command = arg_str(request, "command")
            assert command is not None
            outcome = await session.execute_bash_and_wait(command, arg_int(request, "budget_ms", optional=True))
            return bash_result(outcome)
        if op == "ipython":
            code = arg_str(request, "code")
            assert code is not None
            return ipython_result(await session.ipython(code, arg_int(request, "budget_ms", optional=True)))
        if op == "jobs.list":
            return {"jobs": [job_status(described) for described in session.jobs.list()]}
        if op in ("jobs.wait", "jobs.cancel"):
            job = arg_str(request, "job")
            assert job is not None
            if op == "jobs.cancel":
                return wait_result(await session.jobs.cancel(job))
            return wait_result(await session.jobs.wait(job, arg_int(request, "timeout_ms", optional=True)))
        if op in ("tree.navigate", "tree.fork"):
            old = session.id
            rewound = (
                await session.navigate_tree(_entry_arg(request))
                if op == "tree.navigate"
                else await session.fork(_entry_arg(request))
            )
            answer = rewound.as_json()
            result: dict[str, JSON] = {
                "stoppedJobs": answer["stoppedJobs"],
                "stoppingJobs": answer["stoppingJobs"],
                "leaf": answer["leaf"],
            }
            if op == "tree.fork":
                result |= {"id": answer["sessionId"], "parent": old}
                # This worker goes on in the fork: hold the fork's lock, let go of the old session's.
                fresh = await lock_session(str(answer["sessionId"]))
                os.close(self._lock_fd)
                self._lock_fd = fresh
            return result
        if op == "watch":
            return await self.watch(emit)
        raise RequestError("unknown_op", f"unknown request {op!r}")

    async def watch(self, emit: EventSink) -> JSON:
        """Stream `watch_events` (tool call progress) and the running jobs' output counters until the client goes."""
        stream = self.session.watch_events()
        seen: dict[str, tuple[int, int, bool]] = {}

        async def jobs_progress() -> None:
            while True:
                for described in self.session.jobs.list():
                    key = (described["bytesKept"], described["bytesDropped"], described["running"])
                    if seen.get(described["id"]) != key:
                        seen[described["id"]] = key
                        await emit({"type": "job_update", **job_status(described)})
                await asyncio.sleep(WATCH_POLL_S)

        poller = asyncio.create_task(jobs_progress())
        self.watchers += 1
        try:
            async for event in stream:
                await emit(event)
        finally:
            self.watchers -= 1
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await poller
            await stream.aclose()
        return {"ended": True}

    async def close(self) -> None:
        """Close the session: its running jobs end (killed), the writer commits what it holds; release the lock."""
        try:
            await self.session.close()
        finally:
            os.close(self._lock_fd)


async def open_host(session_id: str | None, cwd: Path) -> SessionHost:
    """Open the saved session `session_id` in `cwd`, or create a new one there when it is None."""
    if session_id is None:
        session = await Session.create(cwd)
        try:
            return SessionHost(session, await lock_session(session.id))
        except BaseException:  # the new session is closed, its journal descriptor and writer task with it
            await session.close()
            raise
    saved_header(session_id)
    lock = await lock_session(session_id)
    try:
        return SessionHost(await Session.open(session_id, cwd=cwd), lock)
    except BaseException:
        os.close(lock)
        raise
