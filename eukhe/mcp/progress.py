"""Progress of a running tool call: MCP progress notifications from the session's live board.

When the client gives a progressToken, the call also opens a `watch` stream on the session (a second connection):
the worker sends a `job_update` whenever a job's output counts or state change (it looks every 200 ms). The call
learns its job id from the daemon's `started` event (`bash`, `ipython`) or from its arguments (`jobs_wait`), and
reports that job's bytes and lines so far (exact: kept plus dropped). A heartbeat reports at least every
HEARTBEAT_S, so a silent command still shows it is alive.

`progress` counts the milliseconds since the call started: it must grow with every notification (MCP), which byte
counts do not while a command is silent. The bytes and lines are in the message.

A cell's output before it detaches is not on the board (the kernel holds it until the cell ends or detaches), so an
`ipython` call reports its time only, until it would have detached anyway.

A `collect` reports how many of the children it waits for still run: every HEARTBEAT_S it reads the session's
roster (`children.list`, a request that answers at once, on a pooled connection).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from eukhe.errors import EukheError
from eukhe.mcp.link import DaemonLink
from eukhe.mcp.results import collect_progress_message, progress_message
from eukhe.records.base import convert
from eukhe.records.children import Roster
from eukhe.records.jobs import JobRow

log = logging.getLogger("eukhe.mcp")

HEARTBEAT_S = 1.0
"""A running call reports at least this often, even when its output did not change."""

Report = Callable[[float, str], Awaitable[None]]


class CallProgress:
    """What one running call has shown so far, and its reports to the client."""

    def __init__(self, report: Report, job: str | None = None) -> None:
        self._report = report
        self.job = job
        self.row: JobRow | None = None
        self._changed = anyio.Event()
        self._last = 0.0

    def on_call_event(self, event: Any) -> None:
        """An event of the call's own request: `started` names its job."""
        if isinstance(event, dict) and event.get("type") == "started" and isinstance(event.get("job"), str):
            self.job = event["job"]
            self._changed.set()

    def on_watch_event(self, event: Any) -> None:
        """An event of the session's watch stream: a `job_update` of the call's job is its progress."""
        if not (isinstance(event, dict) and event.get("type") == "job_update"):
            return
        row = event.get("job")
        if isinstance(row, dict) and self.job is not None and row.get("id") == self.job:
            self.row = convert(row, JobRow, code="daemon_protocol", what="a job_update")
            self._changed.set()

    async def run(self) -> None:
        """Report on every change, and at least every HEARTBEAT_S, until cancelled (the call ended)."""
        start = anyio.current_time()
        while True:
            with anyio.move_on_after(HEARTBEAT_S):
                await self._changed.wait()
            self._changed = anyio.Event()
            elapsed = anyio.current_time() - start
            self._last = max(self._last + 1, float(round(elapsed * 1000)))
            try:
                await self._report(self._last, progress_message(elapsed, self.job, self.row))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the client is gone; the call goes on
            except Exception:  # progress is best effort: a failed report stops the reports, never the call
                log.exception("progress: a report failed; no more reports for this call")
                return

    async def follow(self, link: DaemonLink, session: str) -> None:
        """Read the session's watch stream until cancelled; progress is best effort, so a failure only stops it."""
        try:
            await link.call("watch", {"session": session}, on_event=self.on_watch_event)
        except (EukheError, OSError) as error:
            log.warning("progress: the watch stream ended: %s", error)


class ChildrenProgress:
    """The reports of a running `collect`: every HEARTBEAT_S, how many of its children still run."""

    def __init__(self, report: Report, names: Sequence[str] | None) -> None:
        self._report = report
        self.names = names

    async def run(self, link: DaemonLink, session: str) -> None:
        """Read the roster and report, every HEARTBEAT_S, until cancelled (the call ended)."""
        start = anyio.current_time()
        last = 0.0
        while True:
            await anyio.sleep(HEARTBEAT_S)
            roster: Roster | None = None
            try:
                answer = await link.call("children.list", {"session": session})
                roster = convert(answer, Roster, code="daemon_protocol", what="the daemon's answer to children.list")
            except (EukheError, OSError) as error:  # best effort: the report then gives the time only
                log.warning("progress: the roster could not be read: %s", error)
            elapsed = anyio.current_time() - start
            last = max(last + 1, float(round(elapsed * 1000)))
            try:
                await self._report(last, collect_progress_message(elapsed, roster, self.names))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the client is gone; the call goes on
            except Exception:  # progress is best effort: a failed report stops the reports, never the call
                log.exception("progress: a report failed; no more reports for this call")
                return
