"""The refusal a core record or function gives a fact no real source gives (shared by the *_entry / *_ffi laws)."""

from __future__ import annotations

from collections.abc import Callable

from eukhe.core.fact_errors import FactError


def refused_field(error: type[FactError], make: Callable[[], object]) -> str | None:
    """The field `make` is refused on with `error`, or None when nothing refuses (any other refusal propagates, so
    a law that expects this one fails on it)."""
    try:
        make()
    except error as refused:
        return refused.field
    return None
