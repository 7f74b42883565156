"""A tty job's screen (`eukhe.jobs.terminal.Terminal`, pyte underneath): overwrites and clears rendered, the
scrollback of a line program and its part since the last answer, a full-screen program's screen on the alternate
screen and the scrollback back after it, the raw bytes since the last answer with exact counts, the redraw an
attach starts with."""

from __future__ import annotations

import os
import tty
from collections.abc import Iterator

import pytest

from eukhe.core.bound import DEFAULT_TRUNCATION, Off, On, OutputLimits
from eukhe.jobs.terminal import Terminal


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    master, slave = os.openpty()
    term = Terminal(master, 20, 5, DEFAULT_TRUNCATION, lambda: 0)
    yield term
    term.close()
    os.close(slave)


def test_overwrites_and_clears_are_rendered(terminal: Terminal) -> None:
    terminal.feed(b"50%\r100%\r\nabc\x08\x08X\r\n\x1b[31mred\x1b[0m\r\n")
    assert terminal.text() == "100%\naXc\nred"
    terminal.feed(b"\x1b[2J\x1b[Hclean")
    assert terminal.text().splitlines()[-1] == "clean"


def test_scrollback_keeps_what_scrolled_off_and_the_mark_starts_at_the_cursors_line(terminal: Terminal) -> None:
    terminal.feed(b"".join(b"line %d\r\n" % i for i in range(12)) + b"$ ")
    assert terminal.view == "scrollback"
    assert terminal.text().splitlines() == [f"line {i}" for i in range(12)] + ["$"]
    terminal.mark()
    terminal.feed(b"echo hi\r\nhi\r\n$ ")
    assert terminal.text(since_mark=True).splitlines() == ["$ echo hi", "hi", "$"]
    since = terminal.since()
    assert (since.bytes_kept, since.bytes_dropped, since.text) == (15, 0, b"echo hi\r\nhi\r\n$ ")


def test_the_alternate_screen_is_read_as_the_screen_and_the_scrollback_comes_back(terminal: Terminal) -> None:
    terminal.feed(b"before\r\n$ ")
    terminal.feed(b"\x1b[?1049h\x1b[H\x1b[2Jpage 1\r\npage 2\x1b[5;1H:")
    assert terminal.view == "screen"
    assert terminal.text() == "page 1\npage 2\n\n\n:"
    terminal.feed(b"\x1b[?1049l")
    assert terminal.view == "scrollback"
    assert terminal.text() == "before\n$"


def test_the_text_keeps_the_last_lines_within_the_limits() -> None:
    master, slave = os.openpty()
    term = Terminal(master, 20, 5, On(OutputLimits(1 << 20, 3)), lambda: 0)
    try:
        term.feed(b"".join(b"%d\r\n" % i for i in range(10)))
        assert term.text().splitlines() == ["7", "8", "9"]
        unbounded = Terminal(os.dup(master), 20, 5, Off(), lambda: 0)
        unbounded.feed(b"".join(b"%d\r\n" % i for i in range(10)))
        assert unbounded.text().splitlines() == [str(i) for i in range(10)]
        unbounded.close()
    finally:
        term.close()
        os.close(slave)


def test_redraw_draws_the_screen_and_puts_the_cursor_back(terminal: Terminal) -> None:
    terminal.feed(b"ab\r\ncd")
    assert terminal.redraw() == b"\x1b[H\x1b[2Jab\r\ncd\x1b[2;3H"


def test_a_flood_is_drawn_from_its_tail_and_keeps_its_view(terminal: Terminal) -> None:
    flood = b"".join(b"line %d\r\n" % i for i in range(100_000))
    terminal.feed(flood)
    assert terminal.bytes_total == len(flood)
    assert terminal.since().bytes_kept + terminal.since().bytes_dropped == len(flood)
    assert terminal.text().splitlines()[-1] == "line 99999"
    terminal.feed(b"\x1b[?1049h\x1b[Hfull screen" + flood)  # the switch is in the part left out: it still holds
    assert terminal.view == "screen"
    assert terminal.text().splitlines()[-1] == "line 99999"


def test_a_cursor_position_query_is_answered_at_once() -> None:
    master, slave = os.openpty()
    tty.setraw(slave)  # the reply is read as typed, not as a line
    term = Terminal(master, 20, 5, DEFAULT_TRUNCATION, lambda: 0)
    try:
        term.feed(b"ab\r\ncd\x1b[6n")
        os.set_blocking(slave, False)
        assert os.read(slave, 100) == b"\x1b[2;3R"
    finally:
        term.close()
        os.close(slave)
