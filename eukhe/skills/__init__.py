"""Agent Skills found on disk: the shell over `eukhe.core.skills` (docs/skills.md).

Reads the skills roots (`<cwd>/.agents/skills`, `<cwd>/.claude/skills`, `~/.agents/skills`, `<agent dir>/skills`),
each `<root>/<name>/SKILL.md` and its YAML frontmatter (PyYAML's `safe_load`), and asks the core which skills are
offered. Everything is read fresh on each call: a skill changed on disk shows at the next one. A skill's files are
read as `eukhe.skills.files` says: a project's skill is reached following no symlink from the working directory, and
in every skill no symlink is followed, no FIFO waited on and no file read past a cap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from eukhe.beneath import read_regular
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
from eukhe.skills.files import (
    MAX_FILES,
    SKILL_FILE,
    SKILL_FILE_CAP,
    SkillDir,
    exists,
    is_regular,
    refusal,
)

LINKED_PROJECT_SKILL = (
    "its directory is a symlink: a project skill's directory is not followed (it must be a directory in the project)"
)
"""Why a symlinked skill directory in a project root is not read."""


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


def read_fact(root: int, skill_dir: Path, dir_fd: int) -> SkillFact:
    """The fact of one skill directory (open as `dir_fd`): its SKILL.md's frontmatter parsed, or why it could not
    be (a SKILL.md that is a symlink, not a regular file or over its cap is not read)."""
    skill_file = skill_dir / SKILL_FILE
    python = is_regular(dir_fd, "pyproject.toml")
    try:
        text = read_regular(SKILL_FILE, SKILL_FILE_CAP, dir_fd=dir_fd).decode("utf-8")
    except UnicodeDecodeError as error:
        return SkillFact(root, skill_dir.name, str(skill_file), Unparsable(str(error)), python)
    except OSError as error:
        message = f"{SKILL_FILE}: {refusal(error, SKILL_FILE_CAP)}"
        return SkillFact(root, skill_dir.name, str(skill_file), Unparsable(message), python)
    split = split_frontmatter(text)
    if split is None:
        return SkillFact(root, skill_dir.name, str(skill_file), NO_FRONTMATTER, python)
    try:
        front: object = yaml.safe_load(split[0])
    except yaml.YAMLError as error:
        front = Unparsable(" ".join(str(error).split()))
    return SkillFact(root, skill_dir.name, str(skill_file), front, python)


def skill_dir(cwd: str | os.PathLike[str], root: int, path: str | os.PathLike[str]) -> SkillDir:
    """How the directory `path` under the root `root` is reached: a project's from `cwd` following no symlink, a
    user's as the user laid it out."""
    return SkillDir(str(path), str(cwd) if ROOTS[root][0] is Scope.PROJECT else None)


def _root_entries(place: SkillDir, follow: bool) -> list[tuple[str, bool, bool]]:
    """The visible entries of a root: each name, whether it is a directory (through a symlink when `follow`) and
    whether it is a symlink."""
    with place.opened() as fd, os.scandir(fd) as listing:
        return sorted(
            (entry.name, entry.is_dir(follow_symlinks=follow), entry.is_symlink())
            for entry in listing
            if not entry.name.startswith(".")
        )


def find(cwd: str | os.PathLike[str]) -> tuple[list[tuple[int, Path, bool]], list[SkillFact]]:
    """The roots searched (index, path, whether it exists) and a fact per skill directory found under them. A root
    that is the same directory as one before it (the cwd is the home directory) is searched once, as the first. A
    project root, and a skill directory in it, is reached following no symlink: a symlinked skill directory there
    is the skill of the project it points to when it is one (found once), else an invalid skill that says why."""
    searched: list[tuple[int, Path, bool]] = []
    facts: list[SkillFact] = []
    seen: set[str] = set()
    project_dirs: set[str] = set()  # the real path of each project skill directory found
    linked: list[tuple[int, Path]] = []  # the symlinks to a directory in a project root
    for index, root in roots(cwd):
        exists_here = root.is_dir()
        searched.append((index, root, exists_here))
        real = _same_dir(root)
        if not exists_here or real in seen:
            continue
        seen.add(real)
        project = ROOTS[index][0] is Scope.PROJECT
        try:
            entries = _root_entries(skill_dir(cwd, index, root), follow=not project)
        except OSError:
            continue  # gone, unreadable, or (a project's) reached through a symlink: not searched
        for name, is_dir, is_link in entries:
            path = root / name
            if project and is_link:
                if os.path.isdir(path):
                    linked.append((index, path))
                continue
            if not is_dir:
                continue
            fact = _fact_of(cwd, index, path)
            if fact is not None:
                facts.append(fact)
                if project:
                    project_dirs.add(os.path.realpath(path))
    for index, path in linked:
        if os.path.realpath(path) in project_dirs or not os.path.lexists(path / SKILL_FILE):
            continue  # the same skill as one of the project's (found once there), or no skill at all
        facts.append(SkillFact(index, path.name, str(path / SKILL_FILE), Unparsable(LINKED_PROJECT_SKILL), False))
    return searched, facts


def _fact_of(cwd: str | os.PathLike[str], root: int, path: Path) -> SkillFact | None:
    """The fact of a directory in a root, or None when it holds no SKILL.md (or cannot be opened)."""
    try:
        with skill_dir(cwd, root, path).opened() as fd:
            return read_fact(root, path, fd) if exists(fd, SKILL_FILE) else None
    except OSError:
        return None


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

    def skill_dir(self, fact: SkillFact) -> SkillDir:
        """How a skill's directory is reached (a project's following no symlink from the working directory)."""
        return skill_dir(self.cwd, fact.root, os.path.dirname(fact.skill_file))

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
    skills = discover(cwd)
    fields, fact = skills.get(name)
    text = skills.skill_dir(fact).read(SKILL_FILE, SKILL_FILE_CAP).decode("utf-8")
    split = split_frontmatter(text)
    return SkillShown(
        name=fields.name, scope=fact.scope.value, path=fact.skill_file, body=split[1] if split is not None else text
    )


__all__ = [
    "MAX_FILES",
    "SKILL_FILE",
    "SkillDir",
    "Skills",
    "UnknownSkillError",
    "discover",
    "list_skills",
    "show_skill",
]
