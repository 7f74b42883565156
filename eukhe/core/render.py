"""Model-facing text: what a terminal would leave on screen, as plain text a model can read.

`render(raw)` is the one rendering of an output window for a model (the MCP server's `content`). It is pure and
decides nothing about counts: the counts stay those of the raw bytes (S2 "Limits" 2), and the artifact keeps the raw
bytes. In order:

1. Bytes are decoded as UTF-8; each invalid sequence becomes U+FFFD (as does a lone surrogate in a str).
2. Escape sequences are removed whole: CSI (`ESC [` ... or the C1 byte U+009B), control strings (OSC, DCS, SOS, PM,
   APC: up to BEL, ST or the end of the line), and the other `ESC` sequences (`ESC (B`, `ESC 7`, ...).
3. Every other control character goes, except newline, tab, carriage return and backspace.
4. Each line is replayed as a terminal would draw it: a carriage return moves back to column 0 and what follows
   overwrites (a progress bar collapses to its last state), a backspace moves back one column.

Laws (tests/laws/test_render_laws.py): idempotent; never longer than its input (in characters, or bytes for bytes);
plain text (no control character but newline and tab) passes unchanged; no ESC, carriage return, backspace or other
control character but newline and tab is left.
"""

from __future__ import annotations

import re

ESC = "\x1b"

_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
"""A control string (OSC `ESC ]`, DCS `ESC P`, SOS `ESC X`, PM `ESC ^`, APC `ESC _`, or their C1 forms) up to its
terminator (BEL, ST as `ESC \\` or U+009C); an unterminated one ends at the end of its line, so a cut sequence never
swallows the text below it."""
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
"""A control sequence: parameter bytes, intermediate bytes, one final byte (ECMA-48 5.4)."""
_OTHER = r"\x1b[\x20-\x2f]*[\x30-\x7e]"
"""Any other escape sequence: intermediate bytes and one final byte (charset selection, keypad modes, ...)."""
_SEQUENCE = re.compile(f"{_STRING}|{_CSI}|{_OTHER}")

_CONTROL = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")
"""Control characters that are dropped: C0 but tab, newline, carriage return and backspace; DEL; C1."""
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_OVERWRITE = re.compile(r"[\r\b]")


def render(raw: bytes | str) -> str:
    """The text a model is shown for `raw` output: decoded, escape sequences and controls removed, overwrites
    replayed (see the module docstring)."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else _SURROGATE.sub("\ufffd", raw)
    text = _CONTROL.sub("", _SEQUENCE.sub("", text))
    if not _OVERWRITE.search(text):
        return text
    return "\n".join(_replay(line) if _OVERWRITE.search(line) else line for line in text.split("\n"))


def _replay(line: str) -> str:
    """One line as a terminal leaves it: characters overwrite at the cursor; `\\r` goes to column 0, `\\b` back one.

    Invariant: the result is never longer than the characters written, so never longer than `line`."""
    cells: list[str] = []
    column = 0
    for char in line:
        if char == "\r":
            column = 0
        elif char == "\b":
            column = max(0, column - 1)
        else:
            if column < len(cells):
                cells[column] = char
            else:
                cells.append(char)
            column += 1
    return "".join(cells)
