"""A tty job's terminal: the pseudo-terminal's master side, and the screen a terminal emulator (pyte) draws of it.

Every byte the job writes is fed here as well as to its bounded output (whose counts and artifact keep the raw
bytes): pyte renders cursor movement, clears and overwrites, so what a model reads is what the screen shows. A
program on the alternate screen (less, top, vim) is read as its current screen; any other as its scrollback (the
lines that scrolled off the top, then the screen): `eukhe.core.tty.view_for`.

Each answer about the job marks where it left off (`mark`): the next write's answer carries the raw output since
then (bounded, exact counts) and the scrollback from the line the cursor was on.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import struct
import sys
import termios
from collections import deque
from collections.abc import Callable
from typing import Any

import pyte

from eukhe.core import tty as core
from eukhe.core.bound import On, Truncation
from eukhe.output import BoundedOutput, BoundedResult
from eukhe.procs import stat_fields

TIOCGSID = 0x5429  # ioctl: the session a terminal is the controlling terminal of (Linux; termios lacks the name)
SCROLLBACK_LINES = 5_000
"""The lines a terminal keeps of what scrolled off its screen (a model reads at most its limits' lines of them)."""
ALTERNATE_MODES = frozenset({47 << 5, 1047 << 5, 1049 << 5})
"""The private modes that switch to the alternate screen (pyte stores a private mode shifted by 5 bits)."""
_FOUR = bytes(4)
DRAW_AT_MOST_BYTES = 1 << 18
"""Output not drawn yet past this much is cut to its tail: a flood of output costs the emulator a bounded time."""
DRAWN_TAIL_BYTES = 1 << 15
"""What is drawn of a flood: its last 32 KiB (the screen and its last lines; the raw window and artifact keep all)."""
ALTERNATE_SWITCHES = tuple(f"\x1b[?{mode}{end}".encode() for mode in (47, 1047, 1049) for end in ("h", "l"))
QUERIES = (b"\x1b[6n", b"\x1b[?6n", b"\x1b[5n", b"\x1b[c", b"\x1b[0c")
"""A program's questions to its terminal (where is the cursor, are you there, what are you): drawn at once, so
that the emulator answers them."""
MAX_IDLE_PROCESSES = 64
"""At most this many processes are read to tell whether a program waits; past them it is taken as busy."""
IDLE_STATES = frozenset(b"STtI")
"""/proc/PID/stat states of a program that waits (asleep, stopped): not running, not in uninterruptible I/O."""


class _Screen(pyte.Screen):
    """pyte's screen, with a scrollback, the alternate screen, and replies to the program's queries."""

    def __init__(self, columns: int, lines: int, reply: Callable[[str], None]) -> None:
        self.scrollback: deque[str] = deque(maxlen=SCROLLBACK_LINES)
        self.scrolled = 0  # every line that ever scrolled off the main screen's top
        self.alternate = False
        self._saved: tuple[dict[int, Any], Any] | None = None
        self._reply = reply
        super().__init__(columns, lines)

    def line_text(self, y: int) -> str:
        """Row `y` as text, trailing spaces left out (only the cells drawn are read: most of a row is blank)."""
        line = self.buffer.get(y)
        if not line:
            return ""
        cells = [" "] * self.columns
        for x, char in line.items():
            if x < self.columns:
                cells[x] = char.data
        return "".join(cells).rstrip()

    def index(self) -> None:
        top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
        if not self.alternate and top == 0 and self.cursor.y == bottom:
            self.scrollback.append(self.line_text(0))
            self.scrolled += 1
        super().index()

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and any(mode << 5 in ALTERNATE_MODES for mode in modes) and not self.alternate:
            self._saved = ({y: dict(line) for y, line in self.buffer.items()}, self.cursor)
            self.alternate = True
            self.buffer.clear()
            self.cursor = pyte.screens.Cursor(self.cursor.x, self.cursor.y, self.cursor.attrs)
            self.dirty.update(range(self.lines))
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and any(mode << 5 in ALTERNATE_MODES for mode in modes) and self.alternate:
            self.alternate = False
            self.buffer.clear()
            if self._saved is not None:
                lines, self.cursor = self._saved
                for y, line in lines.items():
                    self.buffer[y].update(line)
            self._saved = None
            self.dirty.update(range(self.lines))
        super().reset_mode(*modes, **kwargs)

    def write_process_input(self, data: str) -> None:
        self._reply(data)


class Terminal:
    """The master side of one tty job's pseudo-terminal, its screen, and the output since the last answer."""

    def __init__(self, master: int, cols: int, rows: int, truncation: Truncation, now_ms: Callable[[], int]) -> None:
        self.fd = master  # a descriptor of its own (the job's output is read from another): written, asked, resized
        self.cols = cols
        self.rows = rows
        self.truncation = truncation
        self._now_ms = now_ms
        self._screen = _Screen(cols, rows, self._reply)
        self._stream = pyte.ByteStream(self._screen)
        self.last_output_ms: int | None = None
        self.bytes_total = 0
        self._listeners: list[Callable[[bytes], None]] = []
        self._since = BoundedOutput(truncation)
        self._mark_row = 0
        self._pending = bytearray()  # output not drawn yet: drawn when what the screen shows is asked for
        self.closed = False

    # -- output --------------------------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Output of the job: drawn on the screen, kept as the output since the last answer, heard by listeners."""
        self.bytes_total += len(data)
        self.last_output_ms = self._now_ms()
        self._since.write(data)
        self._pending += data
        if len(self._pending) > DRAW_AT_MOST_BYTES:
            self._pending = _skipped(self._pending)
        if any(query in data for query in QUERIES):
            self._draw()  # the program waits for the emulator's reply
        for listener in tuple(self._listeners):
            listener(data)

    def listen(self, listener: Callable[[bytes], None]) -> Callable[[], None]:
        """Hear every later chunk of output; answers the function that stops it."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    # -- what a model reads ---------------------------------------------------------------------------------------

    def _draw(self) -> None:
        """Draw the output not drawn yet (an emulator's bug never costs the job its output)."""
        if self._pending:
            pending, self._pending = bytes(self._pending), bytearray()
            with contextlib.suppress(Exception):
                self._stream.feed(pending)

    @property
    def view(self) -> core.View:
        self._draw()
        return core.view_for(self._screen.alternate)

    def screen_lines(self) -> list[str]:
        """The screen as it shows now, a line a row (trailing spaces and blank rows at the bottom left out)."""
        self._draw()
        return _trimmed([self._screen.line_text(y) for y in range(self.rows)])

    def _absolute_row(self) -> int:
        self._draw()
        return self._screen.scrolled + self._screen.cursor.y

    def text(self, since_mark: bool = False) -> str:
        """What a model reads: the screen of a full-screen program; else the scrollback (from the line the cursor
        was on at the last answer with `since_mark`), its last lines within the limits."""
        keep = self.truncation.limits.max_lines if isinstance(self.truncation, On) else None
        if self.view == "screen":
            lines = self.screen_lines()
        else:
            screen = self._screen
            kept = len(screen.scrollback)
            first = screen.scrolled - kept  # the absolute row of the oldest line kept
            start = max(0, self._mark_row - first) if since_mark else 0
            if keep is not None:  # the last `keep` lines above the screen at most (its blank rows are trimmed)
                start = max(start, kept - keep)
            lines = list(itertools.islice(screen.scrollback, min(start, kept), None))
            lines += [screen.line_text(y) for y in range(max(0, start - kept), self.rows)]
            lines = _trimmed(lines)
        if keep is not None:
            lines = lines[-keep:] if keep else []
            budget, first_kept = self.truncation.limits.max_bytes, len(lines)  # type: ignore[union-attr]
            while first_kept and budget >= len(lines[first_kept - 1].encode()) + 1:
                first_kept -= 1
                budget -= len(lines[first_kept].encode()) + 1
            lines = lines[first_kept:]
        return "\n".join(lines)

    def since(self) -> BoundedResult:
        """The raw output since the last answer, bounded (exact counts)."""
        return self._since.snapshot()

    def mark(self) -> None:
        """An answer was given: the output since it starts now, and the scrollback from the cursor's line."""
        self._since.close()
        self._since = BoundedOutput(self.truncation)
        self._mark_row = self._absolute_row()

    # -- the program ----------------------------------------------------------------------------------------------

    def write_some(self, data: bytes) -> int:
        """Write what the terminal takes now of `data` (its input queue may be full); how many bytes it took."""
        if self.closed:
            raise OSError("the terminal is closed")
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0

    def _reply(self, text: str) -> None:
        """The emulator answers a query of the program (the cursor's position, the device's attributes)."""
        with contextlib.suppress(OSError):
            if not self.closed:
                os.write(self.fd, text.encode())

    def session(self) -> int | None:
        """The session (its leader's pid, in this process's pid namespace) the terminal is the controlling
        terminal of; None before the job took it, or once the terminal is gone."""
        try:
            return int.from_bytes(fcntl.ioctl(self.fd, TIOCGSID, _FOUR), sys.byteorder)
        except OSError:
            return None

    def foreground(self) -> int | None:
        """The terminal's foreground process group (an interactive shell moves it to the command it runs)."""
        try:
            return os.tcgetpgrp(self.fd)
        except OSError:
            return None

    def idle(self) -> bool:
        """Whether the program waits: nothing is left unread, and every process of the foreground group (the group's
        leader and its descendants in the group) sleeps or is stopped: a shell waiting for a running child is not."""
        try:
            if int.from_bytes(fcntl.ioctl(self.fd, termios.FIONREAD, _FOUR), sys.byteorder):
                return False
        except OSError:
            return False
        group = self.foreground()
        if group is None:
            return False
        todo, seen = [group], 0
        while todo and seen < MAX_IDLE_PROCESSES:
            pid = todo.pop()
            seen += 1
            facts = _process(pid)
            if facts is None:
                if pid == group:
                    return False  # the group's leader is gone: its members are not known cheaply
                continue
            state, pgid = facts
            if pgid != group:
                continue  # a background job of a shell: not what the terminal waits on
            if state not in IDLE_STATES:
                return False
            todo += _children(pid)
        return not todo

    def redraw(self) -> bytes:
        """Bytes that draw the screen as it shows now on a terminal that attaches (cleared first, the cursor put
        where it is)."""
        self._draw()
        screen = self._screen
        lines = [screen.line_text(y) for y in range(self.rows)]
        body = "\r\n".join(lines).rstrip()
        return f"\x1b[H\x1b[2J{body}\x1b[{screen.cursor.y + 1};{screen.cursor.x + 1}H".encode()

    def resize(self, cols: int, rows: int) -> None:
        """Set the terminal's size (the kernel sends SIGWINCH to the foreground group) and the screen's."""
        set_size(self.fd, cols, rows)
        self._draw()
        self.cols, self.rows = cols, rows
        self._screen.resize(rows, cols)

    def close(self) -> None:
        """The job ended: its terminal is written no more (idempotent)."""
        if not self.closed:
            self.closed = True
            self._since.close()
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self._listeners.clear()


def _skipped(pending: bytearray) -> bytearray:
    """Output past what the emulator draws (it draws some 100 KB a second): its last DRAWN_TAIL_BYTES, after the
    last switch to or from the alternate screen among the bytes left out, so the view stays right."""
    cut = len(pending) - DRAWN_TAIL_BYTES
    head = memoryview(pending)[:cut]
    found = max(((bytes(head).rfind(switch), switch) for switch in ALTERNATE_SWITCHES), default=(-1, b""))
    return bytearray(found[1] if found[0] >= 0 else b"") + pending[cut:]


def _process(pid: int) -> tuple[int, int] | None:
    """(state byte, process group) of a process, from /proc/PID/stat; None if it is gone."""
    fields = stat_fields(pid)
    try:
        return None if fields is None else (fields[0][0], int(fields[2]))
    except (IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as children:
            return [int(word) for word in children.read().split()]
    except (OSError, ValueError):
        return []


def set_size(fd: int, cols: int, rows: int) -> None:
    """TIOCSWINSZ on a terminal descriptor."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1]:
        lines.pop()
    return lines
