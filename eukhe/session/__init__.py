"""Durable sessions (S1 store; S2 tool calls and jobs): `Session` is the Python API a host keeps open."""

from __future__ import annotations

from eukhe.session.session import RewindResult, Session, SessionJobs, UnknownJobError
from eukhe.session.settings import SessionSettings

__all__ = ["RewindResult", "Session", "SessionJobs", "SessionSettings", "UnknownJobError"]
