"""The root of eukhe's error tree; each part adds its own subclasses that carry data, not only a message."""

from __future__ import annotations


class EukheError(Exception):
    """Any error eukhe raises on purpose."""


class UsageError(EukheError, ValueError):
    """A caller passed a value eukhe cannot accept (bad argument, malformed request); exit code 2 at the CLI."""
