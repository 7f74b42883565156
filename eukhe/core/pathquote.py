"""File names in the file tools' texts, one per line whatever they hold (docs/fs.md, `grep` and `glob`).

A name may hold any byte but `/` and NUL: a newline in one would read as two names in a listing. A name that holds a
control character (C0, DEL, C1), or that starts with `"`, is written as a C-style quoted string, as git writes such
paths: `"a\\nb"`. Any other name is written as it is, so ordinary listings read as before, and a line is quoted
exactly when it starts with `"`: every text decodes back to its name (`unquote`).
"""

from __future__ import annotations

ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
UNESCAPES = {value[1]: key for key, value in ESCAPES.items()}


def _control(char: str) -> bool:
    point = ord(char)
    return point < 0x20 or 0x7F <= point < 0xA0


def needs_quotes(name: str) -> bool:
    """Whether a name is written quoted: it holds a control character, or starts with a double quote."""
    return name.startswith('"') or any(_control(char) for char in name)


def quote_path(name: str) -> str:
    """A name (or a relative path) as one line of a listing: as it is, or quoted."""
    if not needs_quotes(name):
        return name
    parts = []
    for char in name:
        if char in ESCAPES:
            parts.append(ESCAPES[char])
        elif _control(char):
            parts.append(f"\\x{ord(char):02x}")
        else:
            parts.append(char)
    return '"' + "".join(parts) + '"'


def unquote_path(line: str) -> str:
    """The name a listing line stands for (`quote_path` undone)."""
    if not line.startswith('"'):
        return line
    body, out, index = line[1:-1], [], 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
        elif body[index + 1] == "x":
            out.append(chr(int(body[index + 2 : index + 4], 16)))
            index += 4
        else:
            out.append(UNESCAPES[body[index + 1]])
            index += 2
    return "".join(out)
