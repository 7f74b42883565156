"""The kernel's request reader: the protocol's stdin is read by whichever side is free, one at a time.

- The loop reads while no cell runs, so a request to an idle kernel is served on the loop's own thread: no other
  thread wakes between the host's write and the cell (a hand-off between threads would cost more than a `1+1`
  cell itself).
- The reader thread reads while a cell runs (and before the loop runs: the snapshot's restore), so an interrupt, a
  shutdown or a host reply is heard while a cell holds the main thread. It waits in its own epoll set, and the
  input is in that set only while the thread reads: a cell's start adds it and its end takes it out, both without
  waking the thread. So the thread wakes only for input that comes while a cell runs, never for a burst of short
  cells the host sends one after another (each wake would take the GIL from a cell).
- `hand_over` gives reading to the thread between cells too (the main thread is about to wait for a host reply);
  the next cell's end gives it back to the loop.
- `repeat` has the thread call a function every so often, between its reads (an interrupt's SIGINT sent again until
  it was heard), so no thread is started for it: a new thread would take the GIL from the main thread just when
  that thread must run the SIGINT's handler.

One lock orders it all: who reads changes under it, and each chunk is read and its lines served under it, so the
two sides never read at once and requests are served in the order they came.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import threading
import time
from collections.abc import Callable

READ_BYTES = 1 << 16

_LOOP, _THREAD = "loop", "thread"


class RequestReader:
    """Reads request lines from `fd` and hands each to `serve` (the kernel's dispatch), in order; `on_eof` runs
    once at end of input. Starts owned by its thread; `to_loop` gives reading to the loop."""

    def __init__(
        self,
        fd: int,
        loop: asyncio.AbstractEventLoop,
        serve: Callable[[bytes], None],
        on_eof: Callable[[], None],
    ) -> None:
        self.fd = fd
        os.set_blocking(fd, False)  # a side reads only what poll said is there; never blocks holding the lock
        self.loop = loop
        self.serve = serve
        self.on_eof = on_eof
        self._lock = threading.RLock()  # reentrant: a served line may ask for a hand-over
        self._owner = _THREAD
        self._registered = False  # the loop's reader callback is installed
        self._ended = False
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a newline
        self._thread_set = select.epoll()  # the thread's wait: the input is in it exactly while the thread reads
        self._thread_set.register(fd, select.EPOLLIN)
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # a `repeat` from another thread
        self._thread_set.register(self._wake_read, select.EPOLLIN)
        self._repeating: Repeat | None = None
        self._thread = threading.Thread(target=self._thread_main, name="eukhe-kernel-reader", daemon=True)

    def start(self) -> None:
        """Start the reader thread (it reads until the loop claims the input)."""
        self._thread.start()

    # ---- what the main thread says -------------------------------------------------------------------------

    def cell_started(self) -> None:
        """A cell starts: the thread reads until it ends."""
        self.hand_over()

    def cell_ended(self) -> None:
        """The cell ended: the loop reads again (called on the loop's thread)."""
        self.to_loop()

    def hand_over(self) -> None:
        """The thread reads from now on, until the loop claims the input again (`to_loop`)."""
        with self._lock:
            if self._owner is not _THREAD and not self._ended:
                self._owner = _THREAD
                self._thread_set.register(self.fd, select.EPOLLIN)

    def to_loop(self) -> None:
        """The loop reads from now on (called on the loop's thread, when nothing holds it)."""
        with self._lock:
            if self._ended:
                return
            if self._owner is _THREAD:
                self._owner = _LOOP
                self._thread_set.unregister(self.fd)  # a thread woken by input already here finds it is not its turn
            if not self._registered:
                self.loop.add_reader(self.fd, self._loop_readable)
                self._registered = True

    def repeat(self, again: Callable[[], bool], every_s: float) -> None:
        """Have the thread call `again` every `every_s` seconds from now until it answers False (a new repeat takes
        the place of the one before)."""
        with self._lock:
            self._repeating = Repeat(again, every_s, time.monotonic() + every_s)
        if threading.current_thread() is not self._thread:
            with contextlib.suppress(BlockingIOError):  # a wake is pending already
                os.write(self._wake_write, b"\0")  # its wait may have no end: it takes up the repeat's deadline

    def _due(self) -> float:
        """How long the thread may wait before the repeat is due (-1: no repeat); a due repeat is called here."""
        with self._lock:
            repeating = self._repeating
        if repeating is None:
            return -1
        now = time.monotonic()
        if now < repeating.next_at:
            return repeating.next_at - now
        going_on = repeating.again()
        with self._lock:
            if self._repeating is not repeating:
                return 0  # replaced meanwhile: look again
            if not going_on:
                self._repeating = None
                return -1
            repeating.next_at = now + repeating.every_s
        return repeating.every_s

    # ---- the two readers -----------------------------------------------------------------------------------

    def _loop_readable(self) -> None:
        with self._lock:
            if self._owner is not _LOOP or self._ended:
                self.loop.remove_reader(self.fd)  # the thread reads now; the loop must not spin on the input
                self._registered = False
                return
            self._read_and_serve()
            if self._ended and self._registered:
                self.loop.remove_reader(self.fd)
                self._registered = False

    def _thread_main(self) -> None:
        fd, wake = self.fd, self._wake_read
        while True:
            events = self._thread_set.poll(self._due())
            readable = False
            for ready, _ in events:
                if ready == wake:  # a wake left unread wakes the wait again: it is level-triggered
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake, 64)
                elif ready == fd:
                    readable = True
            with self._lock:
                if readable and self._owner is _THREAD and not self._ended:
                    self._read_and_serve()
                if self._ended:
                    return

    def _read_and_serve(self) -> None:
        """Read what is there and serve every whole line (under the lock); at end of input, the last part too."""
        try:
            data = os.read(self.fd, READ_BYTES)
        except BlockingIOError:
            return  # the other side took it first
        except OSError:
            data = b""
        if not data:
            self._ended = True
            if self._owner is _THREAD:
                self._thread_set.unregister(self.fd)  # the thread's wait must not see the closed input again
            rest, self._buffer = bytes(self._buffer), bytearray()
            if rest:
                self.serve(rest)
            self.on_eof()
            return
        buffer = self._buffer
        buffer += data
        while True:
            end = buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(buffer)
                return
            line = bytes(buffer[: end + 1])
            del buffer[: end + 1]
            self._scanned = 0
            self.serve(line)


class Repeat:
    """A function the reader thread calls every `every_s` seconds until it answers False; the next call's time."""

    __slots__ = ("again", "every_s", "next_at")

    def __init__(self, again: Callable[[], bool], every_s: float, next_at: float) -> None:
        self.again = again
        self.every_s = every_s
        self.next_at = next_at
