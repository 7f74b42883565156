"""Agent Skills found on disk: the shell over `eukhe.core.skills` (docs/skills.md).

Reads the skills roots (`<cwd>/.agents/skills`, `<cwd>/.claude/skills`, `~/.agents/skills`, `<agent dir>/skills`),
each `<root>/<name>/SKILL.md` and its YAML frontmatter (PyYAML's `safe_load`), and asks the core which skills are
offered. Everything is read fresh on each call: a skill changed on disk shows at the next one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from eukhe.core.skills import (
    NO_FRONTMATTER,
    ROOTS,
    Fields,
    Scope,
    SkillFact,
    Status,
    Unparsable,
    Verdict,
    decide,
    split_frontmatter,
)
from eukhe.errors import CodedError, EukheError
from eukhe.paths import agent_dir
from eukhe.records.skills import SkillDiagnostic, SkillListing, SkillRoot, SkillRow, SkillShown

SKILL_FILE = "SKILL.md"
MAX_FILES = 1000
"""At most this many files of one skill are offered as resources (a skill is a few files, not a tree)."""
SKIPPED_DIRS = frozenset({".git", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"})
"""Directories inside a skill whose files are not the skill's (caches, a checkout's metadata, environments)."""


class UnknownSkillError(EukheError, KeyError):
    """No skill of this name is offered for the working directory."""

    code = "unknown_skill"

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"no skill named {name!r} is offered; offered: {', '.join(known) or 'none'}")
        self.name = name
        self.known = known

    def __str__(self) -> str:
        return str(self.args[0])


def roots(cwd: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The skills roots for a working directory, each with its index into `ROOTS` (precedence order)."""
    base = Path(cwd)
    paths = {
        "~/.agents/skills": Path.home() / ".agents" / "skills",
        "<agent dir>/skills": agent_dir() / "skills",
        "<cwd>/.agents/skills": base / ".agents" / "skills",
        "<cwd>/.claude/skills": base / ".claude" / "skills",
    }
    return [(index, paths[where]) for index, (_, where) in enumerate(ROOTS)]


def _same_dir(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except OSError:
        return str(path)


def read_fact(root: int, skill_dir: Path) -> SkillFact:
    """The fact of one skill directory: its SKILL.md's frontmatter parsed (or why it could not be)."""
    skill_file = skill_dir / SKILL_FILE
    python = (skill_dir / "pyproject.toml").is_file()
    try:
        text = skill_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return SkillFact(root, skill_dir.name, str(skill_file), Unparsable(str(error)), python)
    split = split_frontmatter(text)
    if split is None:
        return SkillFact(root, skill_dir.name, str(skill_file), NO_FRONTMATTER, python)
    try:
        front: object = yaml.safe_load(split[0])
    except yaml.YAMLError as error:
        front = Unparsable(" ".join(str(error).split()))
    return SkillFact(root, skill_dir.name, str(skill_file), front, python)


def find(cwd: str | os.PathLike[str]) -> tuple[list[tuple[int, Path, bool]], list[SkillFact]]:
    """The roots searched (index, path, whether it exists) and a fact per skill directory found under them. A root
    that is the same directory as one before it (the cwd is the home directory) is searched once, as the first."""
    searched: list[tuple[int, Path, bool]] = []
    facts: list[SkillFact] = []
    seen: set[str] = set()
    for index, root in roots(cwd):
        exists = root.is_dir()
        searched.append((index, root, exists))
        real = _same_dir(root)
        if not exists or real in seen:
            continue
        seen.add(real)
        try:
            entries = sorted(os.scandir(root), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            if (Path(entry.path) / SKILL_FILE).is_file():
                facts.append(read_fact(index, Path(entry.path)))
    return searched, facts


@dataclass(frozen=True, slots=True)
class Skills:
    """Every skill found for a working directory, and what became of each."""

    cwd: str
    searched: list[tuple[int, Path, bool]]
    verdicts: tuple[Verdict, ...]

    def offered(self) -> list[tuple[Fields, SkillFact]]:
        """The offered skills, by name: each one's fields and fact."""
        return [(v.fields, v.fact) for v in self.verdicts if v.status is Status.OFFERED and v.fields is not None]

    def get(self, name: str) -> tuple[Fields, SkillFact]:
        """The offered skill of this name (UnknownSkillError when none is)."""
        for fields, fact in self.offered():
            if fields.name == name:
                return fields, fact
        raise UnknownSkillError(name, [fields.name for fields, _ in self.offered()])

    def listing(self) -> SkillListing:
        """The listing record (`eukhe skills list --json`)."""
        return SkillListing(
            cwd=self.cwd,
            roots=[SkillRoot(scope=ROOTS[i][0].value, path=str(p), exists=e) for i, p, e in self.searched],
            skills=[_row(verdict) for verdict in self.verdicts],
        )


def discover(cwd: str | os.PathLike[str] | None = None) -> Skills:
    """Every skill found for `cwd` (default: the current directory), decided."""
    where = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if not os.path.isdir(where):
        raise CodedError("working_dir_error", f"not a directory: {where}", field="cwd")
    searched, facts = find(where)
    return Skills(where, searched, decide(facts))


def _row(verdict: Verdict) -> SkillRow:
    fact, fields = verdict.fact, verdict.fields
    front = fact.frontmatter
    description = fields.description if fields is not None else ""
    if fields is None and isinstance(front, dict) and isinstance(front.get("description"), str):
        description = front["description"]
    return SkillRow(
        name=fact.dir_name,
        description=description,
        scope=fact.scope.value,
        project=fact.scope is Scope.PROJECT,
        path=fact.skill_file,
        dir=str(Path(fact.skill_file).parent),
        python=fact.python,
        status=verdict.status.value,
        offered=verdict.status is Status.OFFERED,
        shadowed_by=verdict.shadowed_by,
        license=fields.license if fields else None,
        compatibility=fields.compatibility if fields else None,
        metadata=dict(fields.metadata) if fields else {},
        allowed_tools=fields.allowed_tools if fields else None,
        diagnostics=[
            SkillDiagnostic(file=d.file, field=d.field, message=d.message, severity=d.severity.value)
            for d in verdict.diagnostics
        ],
    )


def list_skills(cwd: str | os.PathLike[str] | None = None) -> SkillListing:
    """Every skill found for `cwd` (default: the current directory): offered, shadowed and invalid ones."""
    return discover(cwd).listing()


def show_skill(name: str, cwd: str | os.PathLike[str] | None = None) -> SkillShown:
    """The offered skill `name` for `cwd` and its SKILL.md's body (UnknownSkillError when none is offered)."""
    fields, fact = discover(cwd).get(name)
    text = Path(fact.skill_file).read_text(encoding="utf-8")
    split = split_frontmatter(text)
    return SkillShown(
        name=fields.name, scope=fact.scope.value, path=fact.skill_file, body=split[1] if split is not None else text
    )


def skill_files(skill_dir: str | os.PathLike[str]) -> list[str]:
    """The files of a skill, relative to its directory (SKILL.md first, then sorted; caches and hidden entries
    left out, symlinked directories not followed), at most `MAX_FILES`."""
    base = Path(skill_dir)
    found: list[str] = []
    for top, dirs, files in os.walk(base):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        for name in sorted(files):
            if name.startswith(".") or name.endswith(".pyc"):
                continue
            found.append(str((Path(top) / name).relative_to(base)))
    found.sort(key=lambda rel: (rel != SKILL_FILE, rel))
    return found[:MAX_FILES]


__all__ = [
    "SKILL_FILE",
    "Skills",
    "UnknownSkillError",
    "discover",
    "list_skills",
    "show_skill",
    "skill_files",
]
