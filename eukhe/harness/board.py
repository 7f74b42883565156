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
from types import TracebackType
from typing import Protocol

from eukhe.records.daemon import (
    CallProgressRow,
    Progress,
    Snapshot,
    ToolExecutionEnd,
    ToolExecutionUpdate,
    WatchEvent,
)


class LiveCall(Protocol):
    """A running call as the board sees it: its ids, what it reported so far, and what it last published."""

    call: str
    tool: str
    published: Progress | None

    def progress(self) -> Progress:
        """What the call has reported so far."""
        ...


class EventStream:
    """One live observer: an async iterator of board events; close it (or use `async with`) when done."""

    def __init__(self, board: ProgressBoard, first: WatchEvent) -> None:
        self._board = board
        self._queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
        self._queue.put_nowait(first)
        self._closed = False

    def deliver(self, event: WatchEvent) -> None:
        """Queue one event (called by the board)."""
        if not self._closed:
            self._queue.put_nowait(event)

    def pending(self) -> list[WatchEvent]:
        """Take every event delivered and not yet read, without waiting."""
        events: list[WatchEvent] = []
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        return events

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    async def __anext__(self) -> WatchEvent:
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
        self._calls: dict[str, LiveCall] = {}
        self._observers: list[EventStream] = []

    def add(self, live: LiveCall) -> None:
        """A call starts running."""
        self._calls[live.call] = live

    def get(self, call: str) -> LiveCall | None:
        """The call's progress, while the board keeps it."""
        return self._calls.get(call)

    def running(self) -> list[str]:
        """The calls the board keeps, in start order."""
        return list(self._calls)

    def publish(self, call: str) -> None:
        """Send the call's current progress to every observer (nothing once the call has left the board)."""
        live = self._calls.get(call)
        if live is None:
            return
        live.published = live.progress()
        self._send(ToolExecutionUpdate(call=call, tool=live.tool, progress=live.published))

    def remove(self, call: str, status: str) -> None:
        """The call's settle committed: forget it and tell observers it ended; nothing of it is sent after this."""
        live = self._calls.pop(call, None)
        if live is not None:
            self._send(ToolExecutionEnd(call=call, tool=live.tool, status=status))

    def watch(self) -> EventStream:
        """Subscribe now: the first event is the snapshot of the last published progress of each running call."""
        calls = [
            CallProgressRow(call=live.call, tool=live.tool, progress=live.published) for live in self._calls.values()
        ]
        stream = EventStream(self, Snapshot(calls=calls))
        self._observers.append(stream)
        return stream

    def unsubscribe(self, stream: EventStream) -> None:
        """Forget an observer."""
        if stream in self._observers:
            self._observers.remove(stream)

    def _send(self, event: WatchEvent) -> None:
        for observer in list(self._observers):
            observer.deliver(event)
