"""The Python API: a durable session with user bash, jobs, rewinds and a Python kernel (docs/python-api.md).

    from eukhe.api import Session, SessionSettings

Answers are the records of `eukhe.records` (snake_case, `.to_json()` for plain JSON values).
"""

from __future__ import annotations

from eukhe.errors import EukheError, InputError, UsageError
from eukhe.jobs.wait import CallCancelledError
from eukhe.kernel.errors import RemoteCallError
from eukhe.kernel.session import KernelSession as Session
from eukhe.records.jobs import Detached, JobRow, Rewound, Settled
from eukhe.records.remote import RemoteCallAnswer, RemoteCallFailure, RemoteFunction
from eukhe.records.settings import Limits, SessionSettings
from eukhe.session.session import SessionClosedError, UnknownJobError
from eukhe.store.tree import UnknownEntryError

__all__ = [
    "CallCancelledError",
    "Detached",
    "EukheError",
    "InputError",
    "JobRow",
    "Limits",
    "RemoteCallAnswer",
    "RemoteCallError",
    "RemoteCallFailure",
    "RemoteFunction",
    "Rewound",
    "Session",
    "SessionClosedError",
    "SessionSettings",
    "Settled",
    "UnknownEntryError",
    "UnknownJobError",
    "UsageError",
]
