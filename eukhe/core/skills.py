"""Agent Skills: which skills are offered, from the facts of what was found (spec "The kernel environment" 2, the
Agent Skills format).

The shell finds skill directories (each holding a SKILL.md) under the project's and the user's skills roots, parses
each SKILL.md's YAML frontmatter, and hands the facts here. This module decides, with no I/O:

- whether a skill is valid (`validate`): the frontmatter's fields by the rules in `FIELD_RULES`. An error makes the
  skill invalid; an unknown field is only a warning (other agents add fields of their own);
- which skill is offered under each name (`decide`): only valid skills take part; the user's scope wins over the
  project's, and within a scope the root listed first in `ROOTS` wins; every other valid skill of that name is
  shadowed, and its row names the winner;
- the catalog text the MCP instructions carry (`catalog_text`): each offered skill's name and description, the whole
  within a byte limit, cut with a line saying how many were left out;
- which Python skills eukhe installs into the shared kernel venv (`installed_on_host`): the user's only; a
  project's skill is files a confined job can write, so it is imported from its source and never built on the host;
- what a kernel is told of the offered skills (`kernel_skills`): each one's path as the kernel sees it, and each
  Python skill's import path in front of its PYTHONPATH, or left out with a diagnostic when no mount holds it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
CATALOG_MAX_BYTES = 2048
"""The MCP instructions' size limit, the catalog's included (clients cut longer instructions)."""

NAME_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
"""A skill's name: lowercase letters, digits and single hyphens between them (no leading or trailing hyphen)."""

KNOWN_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
"""The frontmatter fields of the Agent Skills format; any other is reported as a warning and ignored."""

FIELD_RULES: dict[str, str] = {
    "name": f"required: 1-{NAME_MAX} characters of a-z, 0-9 and '-', no leading, trailing or double '-', equal to "
    "the directory's name",
    "description": f"required: a string of 1-{DESCRIPTION_MAX} characters",
    "license": "optional: a string",
    "compatibility": f"optional: a string of at most {COMPATIBILITY_MAX} characters",
    "metadata": "optional: a mapping of string keys to string values",
    "allowed-tools": "optional: a string of space-separated tool names (or a list of strings)",
}
"""Each field's rule, as the diagnostics say it (docs/skills.md is this table)."""


class Scope(enum.Enum):
    """Where a skill was found."""

    USER = "user"  # the user's: ~/.agents/skills, <agent dir>/skills
    PROJECT = "project"  # the project's: <cwd>/.agents/skills, <cwd>/.claude/skills


class Status(enum.Enum):
    """What became of a skill found."""

    OFFERED = "offered"  # valid, and the one its name stands for
    SHADOWED = "shadowed"  # valid, but another skill of its name wins (the row names it)
    INVALID = "invalid"  # an error diagnostic: never offered, and it hides no other skill


class Severity(enum.Enum):
    """How much a diagnostic weighs."""

    ERROR = "error"  # the skill is not offered
    WARNING = "warning"  # the skill is offered all the same


ROOTS: tuple[tuple[Scope, str], ...] = (
    (Scope.USER, "~/.agents/skills"),
    (Scope.USER, "<agent dir>/skills"),
    (Scope.PROJECT, "<cwd>/.agents/skills"),
    (Scope.PROJECT, "<cwd>/.claude/skills"),
)
"""The skills roots in precedence order, first wins (a fact's `root` indexes this table)."""


class NoFrontmatter(enum.Enum):
    """SKILL.md does not open with a `---` line and a closing `---` line."""

    NO_FRONTMATTER = "no frontmatter"


NO_FRONTMATTER = NoFrontmatter.NO_FRONTMATTER


@dataclass(frozen=True, slots=True)
class Unparsable:
    """SKILL.md could not be read, or its frontmatter is not YAML: the reader's or parser's message."""

    message: str


@dataclass(frozen=True, slots=True)
class SkillFact:
    """One skill directory found: its root (an index into `ROOTS`), its name, its SKILL.md's path, what its
    frontmatter parsed to (a YAML value, `NO_FRONTMATTER`, or `Unparsable`), and whether it holds a pyproject.toml."""

    root: int
    dir_name: str
    skill_file: str
    frontmatter: object
    python: bool

    @property
    def scope(self) -> Scope:
        return ROOTS[self.root][0]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Something wrong with a skill: the file, the field (None: the frontmatter as a whole), what is wrong."""

    file: str
    field: str | None
    message: str
    severity: Severity


@dataclass(frozen=True, slots=True)
class Fields:
    """A valid skill's frontmatter, read. `allowed_tools` is space-separated, as the format writes it."""

    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    allowed_tools: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of one skill found: its status, its fields when valid, the winner's SKILL.md when shadowed, and
    every diagnostic."""

    fact: SkillFact
    status: Status
    fields: Fields | None
    shadowed_by: str | None
    diagnostics: tuple[Diagnostic, ...]


def name_fault(name: object, dir_name: str) -> str | None:
    """What is wrong with a skill's `name` (None: nothing)."""
    if not isinstance(name, str):
        return f"must be a string, not {_kind(name)}"
    if not 1 <= len(name) <= NAME_MAX:
        return f"must be 1-{NAME_MAX} characters, not {len(name)}"
    if NAME_PATTERN.fullmatch(name) is None:
        return f"{name!r}: only a-z, 0-9 and single '-' between them (no leading, trailing or double '-')"
    if name != dir_name:
        return f"{name!r} must equal the directory's name {dir_name!r}"
    return None


def _string_fault(value: object, longest: int | None, shortest: int = 0) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, not {_kind(value)}"
    if len(value) < shortest or (longest is not None and len(value) > longest):
        bounds = f"{shortest}-{longest}" if shortest else f"at most {longest}"
        return f"must be {bounds} characters, not {len(value)}"
    return None


def _metadata_fault(value: object) -> str | None:
    if not isinstance(value, Mapping):
        return f"must be a mapping of strings to strings, not {_kind(value)}"
    for key, item in value.items():
        if not isinstance(key, str):
            return f"key {key!r} must be a string, not {_kind(key)}"
        if not isinstance(item, str):
            return f"value of {key!r} must be a string, not {_kind(item)} (quote it)"
    return None


def _allowed_tools_fault(value: object) -> str | None:
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        return None
    return f"must be a string of space-separated tool names or a list of strings, not {_kind(value)}"


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def validate(fact: SkillFact) -> tuple[Fields | None, tuple[Diagnostic, ...]]:
    """A skill's fields (None when any error diagnostic) and its diagnostics, errors first in field order."""

    def error(field: str | None, message: str) -> Diagnostic:
        return Diagnostic(fact.skill_file, field, message, Severity.ERROR)

    front = fact.frontmatter
    if front is NO_FRONTMATTER:
        return None, (error(None, "SKILL.md must open with YAML frontmatter between two '---' lines"),)
    if isinstance(front, Unparsable):
        return None, (error(None, f"the frontmatter cannot be read: {front.message}"),)
    if not isinstance(front, Mapping):
        return None, (error(None, f"the frontmatter must be a mapping of fields, not {_kind(front)}"),)
    faults: dict[str, str | None] = {
        "name": name_fault(front.get("name"), fact.dir_name),
        "description": _string_fault(front.get("description"), DESCRIPTION_MAX, shortest=1),
    }
    if "license" in front:
        faults["license"] = _string_fault(front["license"], None)
    if "compatibility" in front:
        faults["compatibility"] = _string_fault(front["compatibility"], COMPATIBILITY_MAX)
    if "metadata" in front:
        faults["metadata"] = _metadata_fault(front["metadata"])
    if "allowed-tools" in front:
        faults["allowed-tools"] = _allowed_tools_fault(front["allowed-tools"])
    errors = tuple(error(field, message) for field, message in faults.items() if message is not None)
    warnings = tuple(
        Diagnostic(fact.skill_file, str(key), "not a field of the Agent Skills format; ignored", Severity.WARNING)
        for key in front
        if key not in KNOWN_FIELDS
    )
    if errors:
        return None, errors + warnings
    tools = front.get("allowed-tools")
    return (
        Fields(
            name=front["name"],
            description=front["description"],
            license=front.get("license"),
            compatibility=front.get("compatibility"),
            metadata=tuple(sorted(front.get("metadata", {}).items())),
            allowed_tools=" ".join(tools) if isinstance(tools, list) else tools,
        ),
        warnings,
    )


def decide(facts: Sequence[SkillFact]) -> tuple[Verdict, ...]:
    """Every skill found, with what became of it: sorted by name, then by precedence (the offered one first)."""
    checked = sorted(((fact, *validate(fact)) for fact in facts), key=lambda row: (row[0].dir_name, row[0].root))
    winners: dict[str, SkillFact] = {}
    verdicts: list[Verdict] = []
    for fact, fields, diagnostics in checked:
        if fields is None:
            verdicts.append(Verdict(fact, Status.INVALID, None, None, diagnostics))
            continue
        winner = winners.setdefault(fields.name, fact)
        if winner is fact:
            verdicts.append(Verdict(fact, Status.OFFERED, fields, None, diagnostics))
        else:
            verdicts.append(Verdict(fact, Status.SHADOWED, fields, winner.skill_file, diagnostics))
    return tuple(verdicts)


def offered(verdicts: Sequence[Verdict]) -> tuple[Fields, ...]:
    """The offered skills' fields, by name."""
    return tuple(v.fields for v in verdicts if v.status is Status.OFFERED and v.fields is not None)


CATALOG_HEAD = (
    "Skills (name: description; read a skill's instructions, SKILL.md, at skill://<name>/SKILL.md before you use it):"
)


def catalog_line(skill: Fields) -> str:
    """One skill's catalog line: its name and its description on one line."""
    return f"- {skill.name}: {' '.join(skill.description.split())}"


def cut_line(left_out: int) -> str:
    """The line that ends a cut catalog."""
    return f"({left_out} more skill{'s' if left_out != 1 else ''} left out here; resources/list lists them all)"


def catalog_text(skills: Sequence[Fields], limit: int = CATALOG_MAX_BYTES) -> str:
    """The catalog: a head line and one line per skill in order, within `limit` bytes of UTF-8 (the empty string
    when there is no skill). When not all fit, the first that fit are kept and a last line says how many were left
    out (and when not even that fits, the empty string)."""
    if not skills:
        return ""
    lines = [CATALOG_HEAD, *(catalog_line(skill) for skill in skills)]
    whole = "\n".join(lines)
    if _size(whole) <= limit:
        return whole
    kept = [CATALOG_HEAD]
    for index, line in enumerate(lines[1:]):
        tail = cut_line(len(skills) - index - 1)
        if _size("\n".join([*kept, line, tail])) > limit:
            break
        kept.append(line)
    text = "\n".join([*kept, cut_line(len(skills) - len(kept) + 1)])
    return text if _size(text) <= limit else ""


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def split_frontmatter(text: str) -> tuple[str, str] | None:
    """(the frontmatter's YAML text, the body after it) of a SKILL.md, or None when it opens with no frontmatter:
    the first line is `---` and a later line is `---`."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n").rstrip() == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :]).lstrip("\r\n")
    return None


def installed_on_host(fact: SkillFact) -> bool:
    """Whether eukhe installs this skill into the kernel venv (building it on the host, with its build backend): a
    Python skill of the user's roots only. A project's skill lies where a confined job can write, so building it
    would run the job's code as the user, outside the sandbox, and the venv is shared by every session: it is
    imported from its source instead."""
    return fact.python and fact.scope is Scope.USER


@dataclass(frozen=True, slots=True)
class KernelSkill:
    """One offered skill as a kernel lists it (`rlm.skills()`): `path` its directory as the kernel sees it (None: no
    mount holds it), `import_path` what goes on the kernel's PYTHONPATH for it (None: nothing)."""

    name: str
    description: str
    scope: Scope
    path: str | None
    python: bool
    import_path: str | None


@dataclass(frozen=True, slots=True)
class KernelSkills:
    """What a kernel is told of the skills: each one, the PYTHONPATH entries in order, a diagnostic per one left
    out."""

    skills: tuple[KernelSkill, ...]
    python_path: tuple[str, ...]
    left_out: tuple[str, ...]


def kernel_skills(
    offered_skills: Sequence[tuple[Fields, SkillFact, str, str]],
    mapped: Callable[[str], str | None],
    *,
    installed: Collection[str] = (),
) -> KernelSkills:
    """From each offered skill (its fields, fact, host directory and host import directory) and the map of host
    paths to the kernel's (None: outside every mount): a Python skill goes on the PYTHONPATH by its mapped import
    directory, unless it is `installed` (by name: a user's skill whose package is in the kernel venv; one whose
    install failed is imported from its source; a project's skill is never installed), and one no mount holds is
    left out with a diagnostic. Invariant: each Python skill not installed is on the path or left out, never
    both; a project's Python skill is always one of the two."""
    skills: list[KernelSkill] = []
    path: list[str] = []
    left_out: list[str] = []
    for fields, fact, host_dir, host_import in offered_skills:
        from_source = fact.python and not (installed_on_host(fact) and fields.name in installed)
        entry = mapped(host_import) if from_source else None
        if from_source:
            if entry is None:
                left_out.append(
                    f"the Python skill {fields.name} ({host_dir}) is outside every mount of the kernel: left out of "
                    "its PYTHONPATH"
                )
            else:
                path.append(entry)
        skills.append(KernelSkill(fields.name, fields.description, fact.scope, mapped(host_dir), fact.python, entry))
    return KernelSkills(tuple(skills), tuple(path), tuple(left_out))
