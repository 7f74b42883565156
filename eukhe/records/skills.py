"""Agent Skills' records: a skill found (a row of `eukhe skills list --json`), the listing, and a skill shown."""

from __future__ import annotations

from typing import Literal

from eukhe.records.base import Record


class SkillDiagnostic(Record):
    """Something wrong with a skill: the file, the frontmatter field (None: the file as a whole), what is wrong;
    an `error` keeps the skill from being offered, a `warning` does not."""

    file: str
    field: str | None
    message: str
    severity: Literal["error", "warning"]


class SkillRow(Record):
    """One skill found. `name` is its directory's name; `status`: `offered`, `shadowed` (another skill of its name
    wins: `shadowed_by` is that one's SKILL.md) or `invalid` (see `diagnostics`). `project`: it is the project's.
    `python`: its directory holds a pyproject.toml (a Python package for the kernel)."""

    name: str
    description: str
    scope: Literal["user", "project"]
    project: bool
    path: str
    dir: str
    python: bool
    status: Literal["offered", "shadowed", "invalid"]
    offered: bool
    metadata: dict[str, str]
    diagnostics: list[SkillDiagnostic]
    shadowed_by: str | None = None
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: str | None = None


class SkillRoot(Record):
    """A directory searched for skills, in precedence order (first wins), and whether it exists."""

    scope: Literal["user", "project"]
    path: str
    exists: bool


class SkillListing(Record):
    """`eukhe skills list --json`: the roots searched for the working directory `cwd`, and every skill found there
    (sorted by name, the offered one of a name first)."""

    cwd: str
    roots: list[SkillRoot]
    skills: list[SkillRow]


class SkillShown(Record):
    """`eukhe skills show NAME --json`: the offered skill of that name, and its SKILL.md's body (after the
    frontmatter)."""

    name: str
    scope: Literal["user", "project"]
    path: str
    body: str
