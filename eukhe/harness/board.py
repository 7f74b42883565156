"""The Harness's in-memory progress board and its live observers (S2 "A tool call" 2-5).

Progress (output, details, diagnostics, usage) is never journaled: a running call reports it here. Reported progress
is what an abort settles from, published or not; `publish` sends the call's current progress to every live observer
as one `tool_execution_update`. The board keeps a call until its settle commits (`remove`), so a settle that failed
to commit and the abort settle after it read the same progress. After `remove` nothing of the call is sent again.

`watch()` subscribes at once: its first event is a snapshot with the last published progress of each running call,
then one event per change, in the order the board made them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from eukhe.output import BoundedOutput

JSON = Any


@dataclass(slots=True)
class CallProgress:
    """What one running call has reported so far (mutable: the board owns it)."""

    call: str
    tool: str
    output: BoundedOutput
    details: JSON = None
    diagnostics: list[str] = field(default_factory=list)
    usage: list[dict[str, int]] = field(default_factory=list)  # every usage report, in order
    published: dict[str, JSON] | None = None  # the last progress sent to observers
    ended: bool = False  # the settle read it: later reports are ignored

    def as_json(self) -> dict[str, JSON]:
        """The progress as observers see it: the bounded output window so far, details, diagnostics, usage."""
        return {
            "output": self.output.snapshot().as_json(),
            "details": self.details,
            "diagnostics": list(self.diagnostics),
            "usage": [dict(report) for report in self.usage],
        }


class EventStream:
    """One live observer: an async iterator of board events; close it (or use `async with`) when done."""

    def __init__(self, board: ProgressBoard, first: dict[str, JSON]) -> None:
        self._board = board
        self._queue: asyncio.Queue[dict[str, JSON]] = asyncio.Queue()
        self._queue.put_nowait(first)
        self._closed = False

    def deliver(self, event: dict[str, JSON]) -> None:
        """Queue one event (called by the board)."""
        if not self._closed:
            self._queue.put_nowait(event)

    def pending(self) -> list[dict[str, JSON]]:
        """Take every event delivered and not yet read, without waiting."""
        events: list[dict[str, JSON]] = []
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        return events

    def __aiter__(self) -> AsyncIterator[dict[str, JSON]]:
        return self

    async def __anext__(self) -> dict[str, JSON]:
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        return await self._queue.get()

    async def aclose(self) -> None:
        """Stop observing (idempotent)."""
        self._closed = True
        self._board.unsubscribe(self)

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()


class ProgressBoard:
    """The running calls' progress, and the observers each change goes to."""

    def __init__(self) -> None:
        self._calls: dict[str, CallProgress] = {}
        self._observers: list[EventStream] = []

    def add(self, progress: CallProgress) -> None:
        """A call starts running."""
        self._calls[progress.call] = progress

    def get(self, call: str) -> CallProgress | None:
        """The call's progress, while the board keeps it."""
        return self._calls.get(call)

    def running(self) -> list[str]:
        """The calls the board keeps, in start order."""
        return list(self._calls)

    def publish(self, call: str) -> None:
        """Send the call's current progress to every observer (nothing once the call has left the board)."""
        progress = self._calls.get(call)
        if progress is None:
            return
        progress.published = progress.as_json()
        self._send(
            {"type": "tool_execution_update", "call": call, "tool": progress.tool, "progress": progress.published}
        )

    def remove(self, call: str, status: str) -> None:
        """The call's settle committed: forget it and tell observers it ended; nothing of it is sent after this."""
        progress = self._calls.pop(call, None)
        if progress is not None:
            self._send({"type": "tool_execution_end", "call": call, "tool": progress.tool, "status": status})

    def watch(self) -> EventStream:
        """Subscribe now: the first event is the snapshot of the last published progress of each running call."""
        calls = [
            {"call": progress.call, "tool": progress.tool, "progress": progress.published}
            for progress in self._calls.values()
        ]
        stream = EventStream(self, {"type": "snapshot", "calls": calls})
        self._observers.append(stream)
        return stream

    def unsubscribe(self, stream: EventStream) -> None:
        """Forget an observer."""
        if stream in self._observers:
            self._observers.remove(stream)

    def _send(self, event: dict[str, JSON]) -> None:
        for observer in list(self._observers):
            observer.deliver(event)
