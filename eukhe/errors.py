"""The root of eukhe's error tree; each part adds its own subclasses that carry data, not only a message."""

from __future__ import annotations


class EukheError(Exception):
    """Any error eukhe raises on purpose."""


class UsageError(EukheError, ValueError):
    """A caller passed a value eukhe cannot accept (bad argument, malformed request); exit code 2 at the CLI."""


def error_code(error: BaseException) -> str:
    """The stable code an error goes out with: its `code` attribute, else its class name in snake case."""
    code = getattr(error, "code", None)
    if isinstance(code, str):
        return code
    name = type(error).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
