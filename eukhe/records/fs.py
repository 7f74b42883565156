"""The records that enter and leave the file tools: request arguments and answers (snake_case keys, strict).

Each is a frozen msgspec Struct that refuses unknown fields, so a request with a misspelt key is refused, not half
read. Every answer with text carries `output`, the bounded window of every other output (docs/output.md).
"""

from __future__ import annotations

from typing import Literal

from eukhe.records.base import Record
from eukhe.records.output import OutputWindow

# --- requests -----------------------------------------------------------------------------------------------------


class ReadArgs(Record):
    """`fs.read`: a text file's lines; `offset` is the first line (1-based), `limit` how many lines (None: all)."""

    path: str
    offset: int | None = None
    limit: int | None = None


class KernelReadArgs(ReadArgs):
    """`fs.read` from a kernel cell: `by_reference` lets the host answer a large unbounded text by where it lies in
    the shared file (`ReadByReference`) instead of sending it over the kernel's pipe (docs/fs.md, "By reference")."""

    by_reference: bool = False


class WriteArgs(Record):
    """`fs.write`: create or replace the file at `path` with `content` (UTF-8)."""

    path: str
    content: str


class EditArgs(Record):
    """`fs.edit`: one multi-file patch (docs/fs.md)."""

    patch: str


class GrepArgs(Record):
    """`fs.grep`: lines matching the regex `pattern` under `path`, in files the optional `glob` selects."""

    pattern: str
    path: str = "."
    glob: str | None = None


class GlobArgs(Record):
    """`fs.glob`: files under `path` whose relative path matches `pattern` (`**` crosses directories)."""

    pattern: str
    path: str = "."


# --- answers ------------------------------------------------------------------------------------------------------


class Bounded(Record):
    """An answer with text: `output` is the bounded window every output carries (docs/output.md)."""

    output: OutputWindow


class ReadAnswer(Bounded):
    """The lines read: `absolute` is the file as the caller sees it; `offset` the first line, `lines` how many lines
    the range held (before bounding), `total_lines` the file's lines."""

    absolute: str
    offset: int
    lines: int
    total_lines: int


class TextSpan(Record):
    """Where an answer's text lies: `length` bytes from byte `start` of the file at `path` (the kernel's own path),
    whose CRC-32 is `crc32`; the kernel reads them and checks the sum before it trusts them."""

    path: str
    start: int
    length: int
    crc32: int


class ReadByReference(ReadAnswer):
    """A kernel's `fs.read` answered by reference: every field of `ReadAnswer`, with `output.text` empty (and no
    `text_base64`), and `text_at` the bytes the kernel reads in its place. The kernel turns it into the `ReadAnswer`
    the host would have sent, or asks again without `by_reference` when the bytes it finds are not those."""

    text_at: TextSpan


class WriteAnswer(Record):
    """The file written: where, how many bytes, and whether it was created (False: replaced)."""

    absolute: str
    bytes_written: int
    created: bool


class EditChange(Record):
    """What one section of a patch did; `destination` only for `moved`."""

    action: Literal["added", "updated", "deleted", "moved"]
    path: str
    destination: str | None = None


class EditAnswer(Record):
    """Every section's change, in the patch's order."""

    changes: tuple[EditChange, ...]


class GrepAnswer(Bounded):
    """Matches as `PATH:LINE:TEXT` lines (paths relative to `absolute`, the search root), sorted by path then line;
    `matches` and `files` count all of them, also those the bound dropped."""

    absolute: str
    matches: int
    files: int


class GlobAnswer(Bounded):
    """Matching files, one relative path a line, sorted; `count` counts all of them."""

    absolute: str
    count: int


class FsRefusal(Record):
    """An `FsError` as a record: what the kernel's `rlm.FsError` is raised from."""

    reason: str
    path: str | None
    message: str
    version: str
