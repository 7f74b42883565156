"""The Python API: a durable session with user bash, jobs, rewinds, a Python kernel and children (docs/python-api.md).

    from eukhe.api import SandboxPolicy, Session, SessionSettings, ToolCalls

A model's tool calls go through `ToolCalls(session).call(tool, args)`: each is journaled (its start, its settle with
the text the model reads), as `eukhe mcp` journals its calls; the session's own methods are not tool calls.

Answers are the records of `eukhe.records` (snake_case, `.to_json()` for plain JSON values).
"""

from __future__ import annotations

from eukhe.calls import ToolCalls, UnknownCallError
from eukhe.children import ChildExistsError, UnknownChildError
from eukhe.children.family import AgentSession as Session
from eukhe.errors import EukheError, InputError, UsageError
from eukhe.jobs.wait import CallCancelledError
from eukhe.kernel.errors import RemoteCallError
from eukhe.records.children import ChildError, ChildReport, ChildRow
from eukhe.records.daemon import CallList, CallRow, ToolCallAnswer
from eukhe.records.displays import Display
from eukhe.records.jobs import Detached, JobRow, Rewound, Settled
from eukhe.records.remote import RemoteCallAnswer, RemoteCallFailure, RemoteFunction
from eukhe.records.sandbox import SandboxChoice, SandboxPolicy
from eukhe.records.settings import Limits, SessionSettings
from eukhe.records.skills import SkillDiagnostic, SkillListing, SkillRow, SkillShown
from eukhe.records.tty import Signalled, Written
from eukhe.session.session import SessionClosedError, SessionHasJobsError, UnknownJobError
from eukhe.skills import UnknownSkillError, list_skills, show_skill
from eukhe.store.tree import UnknownEntryError

__all__ = [
    "CallCancelledError",
    "CallList",
    "CallRow",
    "ChildError",
    "ChildExistsError",
    "ChildReport",
    "ChildRow",
    "Detached",
    "Display",
    "EukheError",
    "InputError",
    "JobRow",
    "Limits",
    "RemoteCallAnswer",
    "RemoteCallError",
    "RemoteCallFailure",
    "RemoteFunction",
    "Rewound",
    "SandboxChoice",
    "SandboxPolicy",
    "Session",
    "SessionClosedError",
    "SessionHasJobsError",
    "SessionSettings",
    "Settled",
    "Signalled",
    "SkillDiagnostic",
    "SkillListing",
    "SkillRow",
    "SkillShown",
    "ToolCallAnswer",
    "ToolCalls",
    "UnknownCallError",
    "UnknownChildError",
    "UnknownEntryError",
    "UnknownJobError",
    "UnknownSkillError",
    "UsageError",
    "Written",
    "list_skills",
    "show_skill",
]
