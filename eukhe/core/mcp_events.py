"""The decisions of resuming an MCP stream over HTTP: which of a connection's SSE events are kept, and which a client
that lost a stream gets again (streamable HTTP, "Resumability and Redelivery").

Rules, all in this file:
- Every event a connection sends on an SSE stream is appended to its log with the next number (1, 2, ...) and the
  stream it belongs to (a request's, or the GET stream); a priming event (it only marks a place: the first event of
  a stream, with no message) is numbered like the others.
- The log is bounded: at most `max_events` events and `max_bytes` bytes of messages; past either, the oldest events
  are dropped first, but the newest is always kept (a response larger than the bound can still be resumed at once).
- A client that resumes after event N (its `Last-Event-ID`) gets, in order, every kept message of N's stream that
  came after N (priming events carry none), and the stream goes on live; when N is not kept (dropped, or never
  given) nothing is replayed: the events after it may be gone too, and a replay must not skip any.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Event(Generic[T]):
    """One event of a connection's log: its number, its stream, its message (None: a priming event) and its size."""

    number: int
    stream: str
    message: T | None
    size: int


@dataclass(frozen=True, slots=True)
class Replay(Generic[T]):
    """What a resuming client gets: the stream it resumes and the events of it to send again, in order."""

    stream: str
    events: tuple[Event[T], ...]


class EventLog(Generic[T]):
    """A connection's bounded log of SSE events."""

    def __init__(self, max_events: int, max_bytes: int) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.events: deque[Event[T]] = deque()
        self.bytes = 0
        self.last = 0

    def append(self, stream: str, message: T | None, size: int) -> int:
        """Keep an event (`size`: its message's bytes), dropping the oldest past the bounds; its number."""
        self.last += 1
        self.events.append(Event(self.last, stream, message, size))
        self.bytes += size
        while len(self.events) > 1 and (len(self.events) > self.max_events or self.bytes > self.max_bytes):
            self.bytes -= self.events.popleft().size
        return self.last

    def after(self, number: int) -> Replay[T] | None:
        """The replay for a client resuming after event `number`; None when that event is not kept."""
        if not self.events or not self.events[0].number <= number <= self.last:
            return None
        resumed = self.events[number - self.events[0].number]  # kept events are numbered without a gap
        later = (event for event in self.events if event.number > number)
        return Replay(resumed.stream, tuple(e for e in later if e.stream == resumed.stream and e.message is not None))
