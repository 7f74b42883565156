"""A session's settings and their JSON form (S2 "Limits" 1: `Truncation`; jobs 4: `toolBlockingBudgetMs`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eukhe.core.limits import DEFAULT_TRUNCATION, Keep, Off, On, OutputLimits, Truncation
from eukhe.errors import UsageError

DEFAULT_BLOCKING_BUDGET_MS = 30_000


class SettingsError(UsageError):
    """A session setting has a value eukhe cannot use."""

    code = "bad_setting"

    def __init__(self, name: str, value: Any) -> None:
        super().__init__(f"bad value for session setting {name}: {value!r}")
        self.name = name
        self.value = value


def truncation_to_json(truncation: Truncation) -> dict[str, Any]:
    """`{"off": true}` or `{"maxBytes": .., "maxLines": .., "keep": "head"|"tail"}`."""
    if isinstance(truncation, Off):
        return {"off": True}
    limits = truncation.limits
    return {"maxBytes": limits.max_bytes, "maxLines": limits.max_lines, "keep": limits.keep.value}


def truncation_from_json(value: Any) -> Truncation:
    """The inverse of `truncation_to_json`; SettingsError on anything else."""
    if not isinstance(value, Mapping):
        raise SettingsError("truncation", value)
    if value.get("off") is True:
        return Off()
    try:
        return On(OutputLimits(value["maxBytes"], value["maxLines"], Keep(value.get("keep", "tail"))))
    except (KeyError, ValueError, TypeError):
        raise SettingsError("truncation", value) from None


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """The settings a session records at create: the output bound and the blocking budget."""

    truncation: Truncation = DEFAULT_TRUNCATION
    tool_blocking_budget_ms: int = DEFAULT_BLOCKING_BUDGET_MS

    def __post_init__(self) -> None:
        budget = self.tool_blocking_budget_ms
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
            raise SettingsError("toolBlockingBudgetMs", budget)
        if not isinstance(self.truncation, On | Off):
            raise SettingsError("truncation", self.truncation)

    def as_json(self) -> dict[str, Any]:
        """The JSON form the session header records."""
        return {"truncation": truncation_to_json(self.truncation), "toolBlockingBudgetMs": self.tool_blocking_budget_ms}

    @classmethod
    def from_json(cls, value: Any) -> SessionSettings:
        """Read the header's settings (missing ones take their defaults)."""
        if not isinstance(value, Mapping):
            return cls()
        truncation = truncation_from_json(value["truncation"]) if "truncation" in value else DEFAULT_TRUNCATION
        return cls(truncation, value.get("toolBlockingBudgetMs", DEFAULT_BLOCKING_BUDGET_MS))
