"""Progress of a running tool call: MCP progress notifications from the session's board.

When the client gives a progressToken, the call also opens a `watch` stream on the session (a second connection).
The call learns its id from the daemon's `call_started` event; the board's `tool_execution_update`s of that call
carry what it reported (`CallLive`: the row and last output lines of the job it runs, a bash command or a cell, or
how many of the children a `collect` awaits have ended). The same board is what `eukhe watch` shows. A heartbeat
reports at least every HEARTBEAT_S, so a silent command still shows it is alive.

`progress` counts the milliseconds since the call started: it must grow with every notification (MCP), which byte
counts do not while a command is silent. The bytes, lines and last output line are in the message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from eukhe.calls.texts import progress_message
from eukhe.errors import EukheError
from eukhe.mcp.link import DaemonLink, EventHandler
from eukhe.records.base import convert
from eukhe.records.daemon import CallLive

log = logging.getLogger("eukhe.mcp")

HEARTBEAT_S = 1.0
"""A running call reports at least this often, even when its progress did not change."""

Report = Callable[[float, str], Awaitable[None]]


class CallProgress:
    """What one running call has shown so far, and its reports to the client."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self.call: str | None = None
        self.live: CallLive | None = None
        self._changed = anyio.Event()
        self._last = 0.0

    def on_call_event(self, event: Any) -> None:
        """An event of the call's own request: `call_started` names the call."""
        if isinstance(event, dict) and event.get("type") == "call_started" and isinstance(event.get("call"), str):
            self.call = event["call"]

    def on_watch_event(self, event: Any) -> None:
        """An event of the session's watch stream: a `tool_execution_update` of this call is its progress."""
        if not isinstance(event, dict) or self.call is None:
            return
        if event.get("type") == "snapshot":  # the watch began after the call published: its last progress
            rows = [row for row in event.get("calls") or [] if isinstance(row, dict) and row.get("call") == self.call]
            event = rows[0] if rows else {}
        elif event.get("type") != "tool_execution_update" or event.get("call") != self.call:
            return
        progress = event.get("progress")
        details = progress.get("details") if isinstance(progress, dict) else None
        if isinstance(details, dict):
            self.live = convert(details, CallLive, code="daemon_protocol", what="a call's progress")
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
                await self._report(self._last, progress_message(elapsed, self.live))
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


async def call_with_progress(
    link: DaemonLink,
    op: str,
    payload: dict[str, Any],
    report: Report,
    *,
    cancel_in_daemon: Callable[[], bool],
    what: str,
    on_event: EventHandler | None = None,
) -> Any:
    """One call (`op`, its payload naming the session) with reports of its progress from the session's board while
    it runs; the call's events go to `on_event` too. The reports live exactly as long as the call."""

    def heard(event: Any) -> None:
        progress.on_call_event(event)
        if on_event is not None:
            on_event(event)

    failure: Exception | None = None
    answer: Any = None
    progress = CallProgress(report)
    payload = {**payload, "events": True}  # `call_started` names the call whose progress the board shows
    async with anyio.create_task_group() as group:
        group.start_soon(progress.follow, link, str(payload["session"]))
        group.start_soon(progress.run)
        try:
            answer = await link.call(op, payload, on_event=heard, cancel_in_daemon=cancel_in_daemon, what=what)
        except Exception as error:  # raised from here, not as a task group's ExceptionGroup
            failure = error
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return answer
