"""Person-facing text: what an agent controls (job output, command texts, file names and contents, messages), made
safe to write to a person's terminal.

A terminal obeys the control characters and escape sequences in what it is given: OSC 52 writes the clipboard,
OSC 0/2 the window title, `CSI 2J` wipes the screen, cursor moves and a bare carriage return let later text cover
what came before, and the Unicode bidi controls reorder what a person reads ("Trojan Source"). `terminal_safe(text)`
keeps what cannot do any of that and shows the rest, inert:

- Kept: every character that is not named below (all printable Unicode: accents, CJK, emoji with their joiners),
  newline, tab, and complete SGR sequences (`ESC [` digits and `;` `m`), so coloured output stays coloured.
- Shown: every other C0 control (ESC and BEL included), DEL, every C1 control (U+0080-U+009F, which some terminals
  read as ESC-equivalents: U+009B is CSI), the bidi embeddings, overrides and isolates (U+202A-U+202E,
  U+2066-U+2069) and lone surrogates (which no terminal encoding can carry) become the escape a JSON or Python
  string literal writes for them: `\\r`, `\\b`, `\\f`, else `\\u` and four hex digits (`\\u001b`, `\\u009b`,
  `\\u202e`). An escape sequence other than SGR thus loses its ESC and reads as text: `\\u001b]52;c;aGk=\\u0007`,
  `\\u001b[2J`. A literal backslash is kept as it is, so the visible form is not told apart from the same
  characters typed; it is inert either way.
- A carriage return before a newline (CRLF) is dropped: it moves nothing a person sees. Any other carriage return is
  shown as `\\r` rather than obeyed or replayed: obeyed or replayed, it lets the end of a line cover its start
  (`rm -rf ~\\rls      ` reads as `ls`), which is the spoofing this guards against; a progress bar shows each of
  its frames on one line.
- Colour never outlives the text: when the last SGR sequence kept is not a reset (`ESC [ 0 m` or `ESC [ m`), one is
  added before the text's trailing newlines, so text made invisible (`ESC [ 8 m`) cannot hide what the terminal
  shows after it.

The visible forms are valid escapes in JSON strings, and the characters shown never stand outside a string in JSON
text: JSON text passed through `terminal_safe` is still JSON, of the same value.

Laws (tests/laws/test_terminal_laws.py): no ESC is left but complete SGR sequences, no C1, no C0 but newline and
tab, no bidi control; text without those passes unchanged; idempotent; the last SGR is a reset; JSON stays JSON of
the same value; it never raises.
"""

from __future__ import annotations

import re

SGR_RESET = "\x1b[0m"
"""The SGR sequence that sets every attribute back to the terminal's default."""
RESETS = frozenset({SGR_RESET, "\x1b[m"})

_SGR = r"\x1b\[[0-9;]*m"
"""Select Graphic Rendition: colours and attributes, and nothing else (ECMA-48 8.3.117)."""
SHOWN = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
"""A regex character class of what is shown, never obeyed: C0 but tab and newline, DEL, C1, the bidi embeddings,
overrides and isolates, lone surrogates."""
_PIECE = re.compile(f"({_SGR})|\r\n|[{SHOWN}]")
_SHORT = {"\b": "\\b", "\f": "\\f", "\r": "\\r"}
"""The characters shown that JSON and Python both write with a letter."""


def visible(char: str) -> str:
    """How one character that is shown reads: `\\r`, `\\b`, `\\f`, else `\\u` and its code in four hex digits."""
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def terminal_safe(text: str) -> str:
    """`text` as it is safe to write to a terminal: complete SGR sequences, newlines, tabs and printable text kept,
    every other control shown as its escape (see the module docstring). Pure and total."""
    last_sgr: str | None = None

    def shown(match: re.Match[str]) -> str:
        nonlocal last_sgr
        piece = match[0]
        if match[1] is not None:
            last_sgr = piece
            return piece
        return "\n" if piece == "\r\n" else visible(piece)

    safe = _PIECE.sub(shown, text)
    if last_sgr is None or last_sgr in RESETS:
        return safe
    body = safe.rstrip("\n")
    return body + SGR_RESET + safe[len(body) :]
