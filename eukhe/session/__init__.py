"""Durable sessions (S1 store; S2 tool calls and jobs): `Session` hosts a conversation, user bash and its jobs.

The Python kernel builds on this layer (`eukhe.kernel.session_kernel`); the public API is `eukhe.api`.
"""

from __future__ import annotations

from eukhe.records.settings import SessionSettings
from eukhe.session.session import Session, SessionClosedError, SessionJobs, UnknownJobError

__all__ = ["Session", "SessionClosedError", "SessionJobs", "SessionSettings", "UnknownJobError"]
