"""The output limits setting (S2 "Limits" 1): `Truncation = On(OutputLimits) | Off`, with its defaults.

The defaults are defined here and nowhere else: 50 KiB (51,200 bytes) and 2000 lines, keeping the tail, which is
what command output wants (the end of a build log says whether it worked).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Keep(enum.Enum):
    """Which end of an output a window keeps."""

    HEAD = "head"  # whole lines from the start
    TAIL = "tail"  # whole lines from the end


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """At most `max_bytes` bytes and `max_lines` lines are kept, from the `keep` end."""

    max_bytes: int
    max_lines: int
    keep: Keep = Keep.TAIL

    def __post_init__(self) -> None:
        if not isinstance(self.max_bytes, int) or isinstance(self.max_bytes, bool) or self.max_bytes < 0:
            raise ValueError(f"max_bytes must be a non-negative integer, got {self.max_bytes!r}")
        if not isinstance(self.max_lines, int) or isinstance(self.max_lines, bool) or self.max_lines < 0:
            raise ValueError(f"max_lines must be a non-negative integer, got {self.max_lines!r}")
        if not isinstance(self.keep, Keep):
            raise ValueError(f"keep must be a Keep, got {self.keep!r}")


@dataclass(frozen=True, slots=True)
class On:
    """Truncation on: keep at most `limits`, count the rest as dropped."""

    limits: OutputLimits


@dataclass(frozen=True, slots=True)
class Off:
    """Truncation off: an explicit opt-out that keeps every byte."""


Truncation = On | Off

DEFAULT_MAX_BYTES = 50 * 1024
DEFAULT_MAX_LINES = 2000
DEFAULT_LIMITS = OutputLimits(DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Keep.TAIL)
DEFAULT_TRUNCATION: Truncation = On(DEFAULT_LIMITS)
