"""The MCP resources of a session: what a model (or its user) can read at any time without a tool call.

- `eukhe://session/running-jobs`: the `running-jobs` section (spec S2 jobs 7): how many jobs run, each one's id,
  command and output so far; "running-jobs: none" when none does.
- `eukhe://session/calls`: the session's tool calls, journaled (every client's, and those a crash interrupted and
  the next open settled), as `eukhe session calls --json` prints them.
- `eukhe://session/jobs`: every job of the session, running or ended, as `jobs_list` shows them.
- `eukhe://session/jobs/<job id>`: one job's output so far (or its end), as `jobs_wait` with no wait shows it; each
  running job is listed, found afresh at each list.
- a cut output's artifact, `file://<path>` (`eukhe.mcp.artifacts`): not listed, linked from the answer that cut it
  (`resource_link`), read a page at a time.
- `skill://<name>/SKILL.md` and `skill://<name>/<relative path>`: the regular files of each skill offered for the
  session's working directory (docs/skills.md), found afresh at each list and read following no symlink, within
  `FILE_CAP`; a text file as text, any other as a blob.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import mcp_types as types

from eukhe.beneath import TooLargeError, read_regular
from eukhe.calls.texts import answer_text, job_list_text, running_jobs_text
from eukhe.records.base import convert
from eukhe.records.jobs import CallAnswer, JobList
from eukhe.skills import SKILL_FILE, Skills, UnknownSkillError, discover
from eukhe.skills.files import FILE_CAP, list_files, refusal


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


def _jobs(answer: Any) -> str:
    return job_list_text(convert(answer, JobList, code="daemon_protocol", what="the daemon's jobs.list"))


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
        Resource(
            "eukhe://session/jobs",
            "jobs",
            "The session's jobs, running or ended: id, kind, exit, how many bytes and lines of output, command.",
            "text/plain",
            "jobs.list",
            _jobs,
        ),
    )
}
"""Every resource the server offers, by URI."""


JOB_PREFIX = "eukhe://session/jobs/"


def job_uri(job_id: str) -> str:
    """`eukhe://session/jobs/<job id>`."""
    return JOB_PREFIX + quote(job_id, safe="")


def parse_job_uri(uri: str) -> str | None:
    """The job id of a job's URI, or None when it is not one."""
    if not uri.startswith(JOB_PREFIX) or len(uri) == len(JOB_PREFIX) or "/" in uri[len(JOB_PREFIX) :]:
        return None
    return unquote(uri[len(JOB_PREFIX) :])


def job_resources(answer: Any) -> list[types.Resource]:
    """One resource per running job of a `jobs.list` answer."""
    jobs = convert(answer, JobList, code="daemon_protocol", what="the daemon's jobs.list")
    return [
        types.Resource(
            name=f"job {row.id}",
            uri=job_uri(row.id),
            description=f"A running {row.kind} job's output so far: {row.command[:200]}",
            mime_type="text/plain",
        )
        for row in jobs.jobs
        if row.status == "running"
    ]


def job_ended(answer: Any, job: str) -> bool:
    """Whether a `jobs.list` answer lists `job` as ended (its end is there to read)."""
    jobs = convert(answer, JobList, code="daemon_protocol", what="the daemon's jobs.list")
    return any(row.id == job and row.status != "running" for row in jobs.jobs)


ENDED_JOB_WAIT_MS = 10_000
"""How long reading an ended job's resource waits for its end: it is there, so the wait answers at once; only a
deadline that passes before the wait looks (1 ms, on a busy host) would answer the output so far instead."""


def job_text(answer: Any) -> str:
    """A job's output so far, or its end, from a `jobs.wait` answer that did not wait."""
    union: Any = CallAnswer  # a union of records
    return answer_text(convert(answer, union, code="daemon_protocol", what="the daemon's jobs.wait"))


SKILL_SCHEME = "skill"
TEXT_TYPES = {".md": "text/markdown", ".py": "text/x-python", ".toml": "application/toml", ".txt": "text/plain"}
"""Media types by suffix where `mimetypes` has none (or, for Markdown, may not on every system)."""


def skill_uri(name: str, relative: str) -> str:
    """`skill://<name>/<relative path>`, the path percent-encoded (its `/` kept)."""
    return f"{SKILL_SCHEME}://{name}/{quote(relative)}"


def parse_skill_uri(uri: str) -> tuple[str, str] | None:
    """(name, relative path) of a `skill://` URI, or None when it is not one."""
    parts = urlsplit(uri)
    if parts.scheme != SKILL_SCHEME or not parts.netloc or not parts.path.strip("/"):
        return None
    return parts.netloc, unquote(parts.path.lstrip("/"))


def _mime(relative: str) -> str:
    suffix = Path(relative).suffix.lower()
    return TEXT_TYPES.get(suffix) or mimetypes.guess_type(relative)[0] or "application/octet-stream"


def skill_resources(skills: Skills) -> list[types.Resource]:
    """One resource per file of each offered skill, SKILL.md first (its description the skill's)."""
    listed: list[types.Resource] = []
    for fields, fact in skills.offered():
        try:
            files = skills.skill_dir(fact).files()
        except OSError:
            continue  # gone since it was found, or swapped for a symlink
        for relative in files:
            is_skill_file = relative == SKILL_FILE
            listed.append(
                types.Resource(
                    name=f"{fields.name}/{relative}",
                    uri=skill_uri(fields.name, relative),
                    description=fields.description if is_skill_file else f"A file of the skill {fields.name}.",
                    mime_type="text/markdown" if is_skill_file else _mime(relative),
                )
            )
    return listed


class SkillFileMissingError(LookupError):
    """A `skill://` URI names a file its skill does not hold (or no longer does, or holds as no regular file)."""


class SkillFileRefusedError(OSError):
    """A skill's file is listed but not served: it is larger than `FILE_CAP`, or was swapped since it was listed."""

    def __str__(self) -> str:
        return str(self.args[0])


def read_skill_file(skills: Skills, uri: str) -> types.TextResourceContents | types.BlobResourceContents:
    """A skill file's contents as it stands now: text when it is UTF-8, else a base64 blob. UnknownSkillError when
    no skill of the name is offered, SkillFileMissingError when the skill holds no such regular file,
    SkillFileRefusedError when it is over the cap (read following no symlink, never blocking)."""
    parsed = parse_skill_uri(uri)
    if parsed is None:
        raise SkillFileMissingError(f"not a skill resource: {uri}")
    name, relative = parsed
    _, fact = skills.get(name)
    missing = SkillFileMissingError(
        f"the skill {name} has no file {relative!r} (only its regular files are served: no symlink, FIFO or device)"
    )
    try:
        with skills.skill_dir(fact).opened() as dir_fd:
            if relative not in list_files(dir_fd):  # only the files listed: no `..`, no hidden file, no cache
                raise missing
            data = read_regular(relative, FILE_CAP, dir_fd=dir_fd)
    except TooLargeError as error:
        raise SkillFileRefusedError(
            f"the skill {name}'s file {relative} is larger than {FILE_CAP >> 20} MiB, the cap of a skill's file: "
            "not served"
        ) from error
    except FileNotFoundError as error:
        raise missing from error
    except OSError as error:
        raise SkillFileRefusedError(
            f"the skill {name}'s file {relative} is not served: {refusal(error, FILE_CAP)}"
        ) from error
    mime = "text/markdown" if relative == SKILL_FILE else _mime(relative)
    try:
        return types.TextResourceContents(uri=uri, mime_type=mime, text=data.decode("utf-8"))
    except UnicodeDecodeError:
        return types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode("ascii"))


__all__ = [
    "RESOURCES",
    "Resource",
    "SkillFileMissingError",
    "SkillFileRefusedError",
    "UnknownSkillError",
    "discover",
    "job_resources",
    "job_text",
    "job_uri",
    "parse_job_uri",
    "parse_skill_uri",
    "read_skill_file",
    "skill_resources",
    "skill_uri",
]
