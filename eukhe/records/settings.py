"""Settings records (S2 "Limits" 1: `Truncation`; jobs 4: the blocking budget): what a session header records.

`truncation` is `{"max_bytes", "max_lines", "keep"}` or the word `"off"` (the explicit opt-out that keeps every
byte). The defaults are the core's (`eukhe.core.limits`), defined there and nowhere else.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from eukhe.core.limits import DEFAULT_LIMITS, Keep, Off, On, OutputLimits, Truncation
from eukhe.records.base import Record

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
DEFAULT_BLOCKING_BUDGET_MS = 30_000
TRUNCATION_OFF: Literal["off"] = "off"


class Limits(Record):
    """Truncation on: keep at most `max_bytes` bytes and `max_lines` lines, from the `keep` end."""

    max_bytes: NonNegative = DEFAULT_LIMITS.max_bytes
    max_lines: NonNegative = DEFAULT_LIMITS.max_lines
    keep: Literal["head", "tail"] = "tail"


TruncationSetting = Limits | Literal["off"]


def truncation_of(setting: TruncationSetting) -> Truncation:
    """The core's Truncation for a setting."""
    if isinstance(setting, Limits):
        return On(OutputLimits(setting.max_bytes, setting.max_lines, Keep(setting.keep)))
    return Off()


def setting_of(truncation: Truncation) -> TruncationSetting:
    """The setting for the core's Truncation."""
    if isinstance(truncation, On):
        limits = truncation.limits
        keep: Literal["head", "tail"] = "head" if limits.keep is Keep.HEAD else "tail"
        return Limits(max_bytes=limits.max_bytes, max_lines=limits.max_lines, keep=keep)
    if isinstance(truncation, Off):
        return TRUNCATION_OFF
    raise TypeError(f"not a Truncation: {truncation!r}")


class SessionSettings(Record):
    """A session's settings, recorded in its header: the output bound and the blocking budget."""

    truncation: TruncationSetting = msgspec.field(default_factory=Limits)
    tool_blocking_budget_ms: NonNegative = DEFAULT_BLOCKING_BUDGET_MS

    @classmethod
    def bounded_by(
        cls, truncation: Truncation, tool_blocking_budget_ms: int = DEFAULT_BLOCKING_BUDGET_MS
    ) -> SessionSettings:
        """Settings from the core's Truncation (`On(OutputLimits(...))` or `Off()`)."""
        return cls(truncation=setting_of(truncation), tool_blocking_budget_ms=tool_blocking_budget_ms)

    @property
    def bound(self) -> Truncation:
        """The output bound as the core's Truncation."""
        return truncation_of(self.truncation)
