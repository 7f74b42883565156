"""The one reading of a number the core's records take from the shell: an int that is not a bool."""

from __future__ import annotations


def is_int(value: object) -> bool:
    """An int, and not a bool (True is an int to Python, never a count or a code to the core)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_count(value: object, minimum: int = 0) -> bool:
    """An int (not a bool) of at least `minimum`: a size, a uid, a pid, a start time."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum
