"""Durable sessions (S1 store; S2 tool calls and jobs): `Session` is the Python API a host keeps open.

`from eukhe.session import Session, SessionSettings` works; the names load lazily, because the harness (which the
session hosts) builds on this package's journal and trees.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RewindResult": "eukhe.session.session",
    "Session": "eukhe.session.session",
    "SessionJobs": "eukhe.session.session",
    "UnknownJobError": "eukhe.session.session",
    "SessionSettings": "eukhe.session.settings",
}
__all__ = ["RewindResult", "Session", "SessionJobs", "SessionSettings", "UnknownJobError"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'eukhe.session' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
