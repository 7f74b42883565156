"""The kernel's request reader: the protocol's stdin is read by whichever side is free, one at a time.

- The loop reads while no cell runs, so a request to an idle kernel is served on the loop's own thread: no other
  thread wakes between the host's write and the cell (a hand-off between threads would cost more than a `1+1`
  cell itself).
- The reader thread takes over when a cell has run for `TAKEOVER_S` (at most twice that), and at once when the
  main thread is about to wait for a host reply, so an interrupt, a shutdown or the reply is heard while a cell
  holds the main thread. It reads until the cell ends; before the loop runs (the snapshot's restore) it reads too.
  The thread wakes at a cell's start only when it waited for none, and never at a cell's end: it looks at its
  deadline, so a burst of short cells wakes it about once per `TAKEOVER_S`, not twice per cell (each wake takes
  the GIL from a cell).

One lock orders it all: who reads changes under it, and each chunk is read and its lines served under it, so the
two sides never read at once and requests are served in the order they came.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import threading
from collections.abc import Callable

TAKEOVER_S = 0.001
"""How long a cell runs before the reader thread takes over reading (a cell shorter than this wakes nobody)."""

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
        self._cond = threading.Condition(threading.RLock())  # reentrant: a served line may ask for a hand-over
        self._owner = _THREAD
        self._busy: int | None = None  # the running cell's number, None between cells
        self._idle = False  # the thread waits for a cell to start, without a deadline
        self._cells = 0
        self._registered = False  # the loop's reader callback is installed
        self._ended = False
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a newline
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._thread_main, name="eukhe-kernel-reader", daemon=True)

    def start(self) -> None:
        """Start the reader thread (it reads until the loop claims the input)."""
        self._thread.start()

    # ---- what the main thread says -------------------------------------------------------------------------

    def cell_started(self) -> None:
        """A cell starts: if it is still running after TAKEOVER_S, the thread takes over reading."""
        with self._cond:
            self._cells += 1
            self._busy = self._cells
            if self._idle:  # its clock starts now; a thread that waits with a deadline sees the cell at it
                self._cond.notify()

    def cell_ended(self) -> None:
        """The cell ended: the loop reads again (called on the loop's thread). The thread is not woken: at its
        deadline it sees that the cell it timed is over."""
        with self._cond:
            self._busy = None
        self.to_loop()

    def hand_over(self) -> None:
        """The main thread is about to wait for a host reply: the thread reads from now until the cell ends."""
        with self._cond:
            if self._owner is not _THREAD and not self._ended:
                self._owner = _THREAD
                self._cond.notify()

    def to_loop(self) -> None:
        """The loop reads from now on (called on the loop's thread, when nothing holds it)."""
        with self._cond:
            if self._ended:
                return
            if self._owner is _THREAD:
                self._owner = _LOOP
                with contextlib.suppress(BlockingIOError):
                    os.write(self._wake_write, b"\0")  # out of its poll: the thread stops reading
            if not self._registered:
                self.loop.add_reader(self.fd, self._loop_readable)
                self._registered = True

    # ---- the two readers -----------------------------------------------------------------------------------

    def _loop_readable(self) -> None:
        with self._cond:
            if self._owner is not _LOOP or self._ended:
                self.loop.remove_reader(self.fd)  # the thread reads now; the loop must not spin on the input
                self._registered = False
                return
            self._read_and_serve()
            if self._ended and self._registered:
                self.loop.remove_reader(self.fd)
                self._registered = False

    def _thread_main(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        while True:
            with self._cond:
                while self._owner is not _THREAD:
                    if self._ended:
                        return
                    if self._busy is None:
                        self._idle = True
                        self._cond.wait()
                        self._idle = False
                        continue
                    if not self._cond.wait_for(self._cell_changed(self._busy), TAKEOVER_S):
                        self._owner = _THREAD  # the same cell still runs: read for it
            poller.poll()
            with self._cond:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_read, 64)
                if self._owner is _THREAD and not self._ended:
                    self._read_and_serve()
                if self._ended:
                    return

    def _cell_changed(self, cell: int) -> Callable[[], bool]:
        """Whether the cell numbered `cell` ended (or reading was handed over) since the question was asked."""
        return lambda: self._busy != cell or self._owner is _THREAD

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
            self._cond.notify()  # a thread waiting for its turn to read has nothing left to read
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
