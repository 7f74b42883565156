"""Laws of eukhe.core.terminal: agent-controlled text made safe to write to a person's terminal.

Checked with Hypothesis over any text (lone surrogates included) and over text built from what a hostile program
writes (OSC 52, title changes, screen wipes, cursor moves, C1 controls, bidi overrides, carriage returns), and
exhaustively over every string of up to three pieces of a small alphabet of those.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from eukhe.core.terminal import SGR_RESET, terminal_safe

SGR = re.compile(r"\x1b\[[0-9;]*m")
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What must never reach the terminal once the SGR sequences are taken out: C0 but newline and tab (ESC and CR
included), DEL, C1, the bidi controls, lone surrogates."""

DANGEROUS = [
    "\x1b]52;c;aGVsbG8=\x07",  # OSC 52: write the clipboard
    "\x1b]0;pwned\x07",  # the window title
    "\x1b]2;pwned\x1b\\",  # the title, ended by ST
    "\x1b[2J",  # wipe the screen
    "\x1b[H",  # cursor home
    "\x1b[3A",  # cursor up
    "\x1b[?1049h",  # the alternate screen
    "\x1bP+q544e\x1b\\",  # DCS: ask the terminal to answer
    "\x1b_apc\x1b\\",
    "\x1b^pm\x1b\\",
    "\x1bXsos\x1b\\",
    "\x1b(0",  # charset designation: line drawing
    "\x1bc",  # full reset
    "\x1b",
    "\x1b[",
    "\x9b2J",  # C1 CSI
    "\x9d0;t\x9c",  # C1 OSC ... ST
    "\x85",
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u2069",
    "\r",
    "\r\n",
    "\b",
    "\x07",
    "\x00",
    "\x7f",
    "\x0c",
    "\ud800",
    "\x1b[31m",  # SGR: kept
    "\x1b[1;32;40m",
    "\x1b[0m",
    "\x1b[m",
    "\x1b[8m",
]
PLAIN_PIECES = ["a", "\n", "\t", " ", "é", "中", "👨\u200d👩\u200d👧", "\\", "[2J", "m", "0"]
SMALL_ALPHABET = DANGEROUS + PLAIN_PIECES

PLAIN = st.text(st.characters(exclude_categories=("Cc", "Cs")) | st.sampled_from("\n\t")).filter(
    lambda text: not FORBIDDEN.search(text)
)
"""Text a terminal only prints: no control character but newline and tab, no bidi control."""
HOSTILE = st.lists(st.sampled_from(SMALL_ALPHABET) | PLAIN, max_size=30).map("".join)
ANY_TEXT = st.text(st.characters(exclude_categories=())) | HOSTILE
"""Any str, lone surrogates included, and text built from hostile pieces (so that the interesting cases are
common)."""


def check_safe(text: str) -> str:
    """The laws every result keeps; the result."""
    safe = terminal_safe(text)
    without_sgr = SGR.sub("", safe)
    assert "\x1b" not in without_sgr, (text, safe)
    assert not FORBIDDEN.search(without_sgr), (text, safe)
    assert terminal_safe(safe) == safe, (text, safe)
    assert safe.count("\n") == text.count("\n"), (text, safe)
    colours = SGR.findall(safe)
    assert not colours or colours[-1] in {SGR_RESET, "\x1b[m"}, (text, safe)
    return safe


@given(ANY_TEXT)
@example("\x1b\x1b[31m")
@example("\r\r\n")
@example("\x1b[31mred\n\n")
def test_terminal_safe_leaves_no_control_but_sgr_newline_and_tab(text: str) -> None:
    """No ESC but complete SGR sequences, no C1, no C0 but newline and tab, no bidi control; idempotent; lines kept;
    colour reset at the end; never raises."""
    check_safe(text)


def test_terminal_safe_small_scope() -> None:
    """Every string of up to three pieces of the alphabet: the same laws, exhaustively."""
    for size in range(4):
        for pieces in itertools.product(SMALL_ALPHABET, repeat=size):
            check_safe("".join(pieces))


@given(PLAIN)
def test_terminal_safe_keeps_plain_text_unchanged(text: str) -> None:
    assert terminal_safe(text) == text


@given(PLAIN, PLAIN)
def test_terminal_safe_keeps_colour(before: str, after: str) -> None:
    """Coloured output stays coloured: SGR sequences are kept as they are, and a reset ends the text."""
    assert terminal_safe(f"{before}\x1b[1;31m{after}\x1b[0m") == f"{before}\x1b[1;31m{after}\x1b[0m"
    body = f"{before}\x1b[32m{after}".rstrip("\n")
    newlines = f"{before}\x1b[32m{after}"[len(body) :]
    assert terminal_safe(f"{before}\x1b[32m{after}") == body + SGR_RESET + newlines


OPEN_SGR = re.compile(r"\x1b(?:\[[0-9;]*)?$")
"""The start of an SGR sequence that the text after it could complete."""
UNAMBIGUOUS = [
    piece for piece in DANGEROUS if "\\" not in piece and not SGR.search(piece) and not OPEN_SGR.search(piece)
]
"""Dangerous pieces with no backslash of their own that cannot become an SGR sequence with the text after them."""
ESCAPE = re.compile(r"\\(?:u([0-9a-f]{4})|([rbf]))")
LETTERS = {"r": "\r", "b": "\b", "f": "\f"}


def read_back(safe: str) -> str:
    """The text whose visible forms `safe` holds (for a text that held no backslash)."""
    return ESCAPE.sub(lambda match: chr(int(match[1], 16)) if match[1] else LETTERS[match[2]], safe)


@given(st.lists(st.sampled_from(UNAMBIGUOUS) | PLAIN.filter(lambda text: "\\" not in text), max_size=20).map("".join))
@example("\x1b]52;c;aGk=\x07\u202e\x9b2J\r\n\r")
def test_terminal_safe_shows_what_it_does_not_obey(text: str) -> None:
    """Nothing is dropped unseen: the visible forms read back as the text itself, but a CR before a newline (which
    moves nothing a person sees)."""
    assert read_back(terminal_safe(text)) == text.replace("\r\n", "\n")


def test_terminal_safe_examples() -> None:
    assert terminal_safe("\x1b]52;c;aGVsbG8=\x07") == "\\u001b]52;c;aGVsbG8=\\u0007"
    assert terminal_safe("\x1b]0;title\x1b\\") == "\\u001b]0;title\\u001b\\"
    assert terminal_safe("\x1b[2J\x1b[H") == "\\u001b[2J\\u001b[H"
    assert terminal_safe("\x9b2J \x85") == "\\u009b2J \\u0085"
    assert terminal_safe("safe\u202e}txt.exe") == "safe\\u202e}txt.exe"
    assert terminal_safe("10%\r20%\rdone\r\n") == "10%\\r20%\\rdone\n"
    assert terminal_safe("rm -rf ~\rls      ") == "rm -rf ~\\rls      "
    assert terminal_safe("a\bb\x00\x7f\x0c") == "a\\bb\\u0000\\u007f\\f"
    assert terminal_safe("\x1b[1;31merror\x1b[0m: bad\n") == "\x1b[1;31merror\x1b[0m: bad\n"
    assert terminal_safe("\x1b[8mhidden\n") == "\x1b[8mhidden\x1b[0m\n"
    assert terminal_safe("lone \ud800") == "lone \\ud800"
    assert terminal_safe("tab\tstays, é 中 👨\u200d👩\u200d👧\n") == "tab\tstays, é 中 👨\u200d👩\u200d👧\n"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=10,
)


@given(JSON)
def test_terminal_safe_keeps_json_text_json_of_the_same_value(value: Any) -> None:
    """`--json` on a terminal: JSON text (control characters escaped, the rest as it is) passed through
    terminal_safe reads back as the same value (surrogate pairs joined as any JSON reader joins them)."""
    for indent in (None, 2):
        text = json.dumps(value, ensure_ascii=False, indent=indent)
        assert json.loads(terminal_safe(text)) == json.loads(json.dumps(value))
