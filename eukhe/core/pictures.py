"""The bound on a cell's pictures (the `ipython` tool's images): which images an answer shows, which it only saves,
which it only counts; and the size a PNG or JPEG says it has.

Images come one at a time, in the order the cell displayed them. Each is decided on the count so far and its size,
by this table (first row that holds):

| the image                                        | verdict     | the answer                                       |
| ------------------------------------------------ | ----------- | ------------------------------------------------ |
| `saved` already `max_saved`                      | `DROP`      | counted in `dropped` only (no file, no record)   |
| over `max_image_bytes`                           | `TOO_LARGE` | saved as an artifact and named, not shown        |
| `shown` already `max_shown`                      | `OVER_COUNT`| saved as an artifact and named, not shown        |
| else                                             | `SHOW`      | saved, named and shown (MCP `image` content)     |

Invariants: shown <= max_shown, every image shown is at most max_image_bytes, saved <= max_saved,
shown + withheld = saved, saved + dropped = every image. The notice is present exactly when an image was not shown.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace

MAX_IMAGE_BYTES = 2 * 1024 * 1024
"""An image over this is saved but not shown: clients refuse (or silently drop) images of a few MiB."""
MAX_SHOWN = 8
"""An answer shows at most this many images; the later ones are saved and named."""
MAX_SAVED = 64
"""At most this many images of one answer are saved; the later ones are only counted (a loop of displays)."""


class Verdict(enum.Enum):
    """What becomes of one image."""

    SHOW = "show"  # saved, named and shown
    TOO_LARGE = "too_large"  # saved and named; over the size per image
    OVER_COUNT = "over_count"  # saved and named; the answer shows max_shown already
    DROP = "drop"  # counted only; the answer saved max_saved already


@dataclass(frozen=True, slots=True)
class Limits:
    """The bound on one answer's images."""

    max_image_bytes: int = MAX_IMAGE_BYTES
    max_shown: int = MAX_SHOWN
    max_saved: int = MAX_SAVED


@dataclass(frozen=True, slots=True)
class Tally:
    """The images of one answer so far: how many were shown, saved (shown or not) and dropped; why some were not
    shown."""

    shown: int = 0
    saved: int = 0
    dropped: int = 0
    too_large: int = 0
    over_count: int = 0


def admit(tally: Tally, size: int, limits: Limits) -> tuple[Tally, Verdict]:
    """One image of `size` bytes: its verdict by the table above, and the tally after it."""
    if tally.saved >= limits.max_saved:
        return replace(tally, dropped=tally.dropped + 1), Verdict.DROP
    if size > limits.max_image_bytes:
        return replace(tally, saved=tally.saved + 1, too_large=tally.too_large + 1), Verdict.TOO_LARGE
    if tally.shown >= limits.max_shown:
        return replace(tally, saved=tally.saved + 1, over_count=tally.over_count + 1), Verdict.OVER_COUNT
    return replace(tally, shown=tally.shown + 1, saved=tally.saved + 1), Verdict.SHOW


def admit_all(sizes: Iterable[int], limits: Limits) -> tuple[Tally, tuple[Verdict, ...]]:
    """Every image of an answer, in order."""
    tally = Tally()
    verdicts: list[Verdict] = []
    for size in sizes:
        tally, verdict = admit(tally, size, limits)
        verdicts.append(verdict)
    return tally, tuple(verdicts)


def _images(number: int) -> str:
    return "1 image" if number == 1 else f"{number} images"


def notice(tally: Tally, limits: Limits) -> str | None:
    """The one line that says which images the answer does not show, and why (None when it shows them all)."""
    parts: list[str] = []
    if tally.too_large:
        parts.append(f"{_images(tally.too_large)} over {limits.max_image_bytes} bytes each")
    if tally.over_count:
        parts.append(f"{_images(tally.over_count)} past the {limits.max_shown} an answer shows")
    if parts:
        parts[-1] += " (saved: their artifacts are named above)"
    if tally.dropped:
        parts.append(f"{_images(tally.dropped)} past the {limits.max_saved} an answer saves (not saved)")
    if not parts:
        return None
    return f"[not shown: {'; '.join(parts)}]"


# ---- sizes -----------------------------------------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""The JPEG markers that start a frame (SOF0-SOF15 but DHT, JPG and DAC): the frame header holds the size."""


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG (its IHDR) or a JPEG (its frame header); None for anything else or a broken head."""
    if data.startswith(PNG_SIGNATURE) and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if marker in _JPEG_FRAMES:
            if position + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        position += 2 + length
    return None
