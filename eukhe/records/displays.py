"""A cell's rich displays as they travel in its answer (the `ipython` tool, `eukhe ipython --json`, the Python API).

An image a cell displayed (`display(obj)`, its last value, a matplotlib figure) is saved as an artifact in the
session's artifacts dir and named here with its MIME type, size and, for PNG and JPEG, its width and height. `shown`
says whether the answer shows it (MCP `image` content); `withheld` why not (eukhe.core.pictures: over the size per
image, or past the count an answer shows). The bytes themselves are only in the artifact: the journal keeps the
record, not the image.
"""

from __future__ import annotations

from typing import Literal

from eukhe.records.base import Record

Withheld = Literal["too_large", "over_count"]


class Display(Record):
    """One image of a cell's answer: its MIME type, bytes, pixel size, its artifact, and whether it is shown."""

    mime_type: str
    bytes: int
    width: int | None
    height: int | None
    artifact: str | None
    """The file holding the image (null when it could not be written: `artifact_error` says why)."""
    shown: bool
    withheld: Withheld | None = None
    artifact_error: str | None = None
