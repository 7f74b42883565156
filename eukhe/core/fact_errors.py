"""How the core's records read the facts the shell hands them: a count is an int that is not a bool, and a fact no
real source gives raises a `FactError` naming its first wrong field (each module refuses with its own subclass)."""

from __future__ import annotations

from typing import ClassVar


class FactError(ValueError):
    """A fact the shell cannot have read: `field` names the first wrong part."""

    what: ClassVar[str] = "a fact"

    def __init__(self, field: str, value: object) -> None:
        super().__init__(f"{field}: not {self.what}: {value!r}")
        self.field = field


def is_int(value: object) -> bool:
    """An int, and not a bool (True is an int to Python, never a count or a code to the core)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_count(value: object, minimum: int = 0) -> bool:
    """An int (not a bool) of at least `minimum`: a size, a uid, a pid, a start time."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum
