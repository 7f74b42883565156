"""The MCP resources of a session: what a model (or its user) can read at any time without a tool call.

- `eukhe://session/running-jobs`: the `running-jobs` section (spec S2 jobs 7): how many jobs run, each one's id,
  command and output so far; "running-jobs: none" when none does.
- `eukhe://session/calls`: the session's tool calls, journaled (every client's, and those a crash interrupted and
  the next open settled), as `eukhe session calls --json` prints them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from eukhe.calls.texts import running_jobs_text
from eukhe.records.base import convert
from eukhe.records.jobs import JobList


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource: its URI, the daemon op it reads, and how its answer becomes the resource's text."""

    uri: str
    name: str
    description: str
    mime_type: str
    op: str
    text: Callable[[Any], str]

    def listing(self) -> types.Resource:
        return types.Resource(name=self.name, uri=self.uri, description=self.description, mime_type=self.mime_type)


def _running_jobs(answer: Any) -> str:
    return running_jobs_text(convert(answer, JobList, code="daemon_protocol", what="the daemon's jobs.list"))


def _calls(answer: Any) -> str:
    return json.dumps(answer, ensure_ascii=False, indent=1)


RESOURCES: dict[str, Resource] = {
    resource.uri: resource
    for resource in (
        Resource(
            "eukhe://session/running-jobs",
            "running-jobs",
            "The session's running jobs: how many, and each one's id, command and output so far.",
            "text/plain",
            "jobs.list",
            _running_jobs,
        ),
        Resource(
            "eukhe://session/calls",
            "calls",
            "The session's tool calls, journaled: each one's tool, arguments, status, times and result summary.",
            "application/json",
            "session.calls",
            _calls,
        ),
    )
}
"""Every resource the server offers, by URI."""
