"""Packages the user adds to the kernel venv (`eukhe kernel install --with NAME...`): the decisions, pure.

The kernel venv is hash-locked and a session never downloads for it. Packages the user adds keep both rules: the
install command resolves them once into a lock of their own (every wheel pinned with its hashes, resolved against
the kernel lock's pins so the kernel's own packages keep their versions), records the names and that lock beside
the venv, and builds the venv with both locks under `--require-hashes`. The build id covers the added lock, so a
session whose venv is for another build rebuilds it offline from uv's cache with the added packages too.

Decisions here:
1. `parse_requirement`: what the user may name: a distribution name, optional extras and version specifiers; no URL,
   path, option or marker (a line of a requirements file that could do more than name a package is refused).
2. `merged`: the recorded requirements with `--with` added (a new one for a name replaces the old) and `--without`
   taken out, by the name's canonical form.
3. `plan_added`: for the install command, whether the added lock is kept, made again (the names changed, the kernel
   lock changed under it, or the venv's Python did), or dropped; a session or `--check` only ever uses what is
   recorded (`applies`: a lock made for the Python the venv is built on).
4. `pins` and `without`: reading a lock's text: the `name==version` pins of the kernel lock (the resolver's
   constraints), and an added lock without the packages the kernel lock already pins.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_EXTRAS = rf"\[\s*{_NAME}(?:\s*,\s*{_NAME})*\s*\]"
_VERSION = r"[A-Za-z0-9.*+!_-]+"
_SPEC = rf"(?:===|==|!=|~=|<=|>=|<|>)\s*{_VERSION}"
REQUIREMENT = re.compile(rf"({_NAME})\s*({_EXTRAS})?\s*({_SPEC}(?:\s*,\s*{_SPEC})*)?")
"""What `--with` takes: `name`, `name[extra,...]`, each with optional specifiers (`pandas>=2,<3`)."""

REQUIREMENT_RULE = (
    "a package name with optional [extras] and version specifiers (pandas, pandas>=2.2, rich[jupyter]==13.7.1); "
    "no URL, path, option or marker"
)


class RequirementError(ValueError):
    """A `--with` value that is not a plain requirement (`text` is what was given)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"--with {text!r}: not {REQUIREMENT_RULE}")
        self.text = text


def canonical(name: str) -> str:
    """A distribution name as installers compare names (PEP 503): lowercase, runs of `-_.` as one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement the user named: its canonical name and its text, as a requirements file line."""

    name: str
    text: str


def parse_requirement(text: str) -> Requirement:
    """The requirement `text` names, or RequirementError."""
    if not isinstance(text, str):
        raise RequirementError(repr(text))
    stripped = text.strip()
    match = REQUIREMENT.fullmatch(stripped)
    if match is None:
        raise RequirementError(text)
    return Requirement(canonical(match.group(1)), stripped)


def merged(recorded: Sequence[str], added: Sequence[str], removed: Sequence[str]) -> tuple[str, ...]:
    """The requirements after `--with added` and `--without removed` (names, any spelling): a recorded one keeps
    its place, a new one for its name replaces it there, others come after in the order given."""
    gone = {parse_requirement(name).name for name in removed}
    order: list[str] = []
    by_name: dict[str, str] = {}
    for text in [*recorded, *added]:
        requirement = parse_requirement(text)
        if requirement.name not in by_name:
            order.append(requirement.name)
        by_name[requirement.name] = requirement.text
    return tuple(by_name[name] for name in order if name not in gone)


@dataclass(frozen=True, slots=True)
class AddedRecord:
    """What the record beside the venv holds: the requirements, the base lock's digest and the Python (its record's
    text) the added lock was made for."""

    requirements: tuple[str, ...]
    base: str
    python: str


class AddedStep(enum.Enum):
    """What the install command does with the added packages."""

    NONE = "none"  # none named, none recorded
    KEEP = "keep"  # the recorded lock is for these names, this kernel lock and this Python
    MAKE = "make"  # resolve the names into a new lock (the only step that reaches an index), then build with it
    DROP = "drop"  # none named any more: remove the record, build without


def plan_added(wanted: Sequence[str], recorded: AddedRecord | None, *, base: str, python: str) -> AddedStep:
    """The install command's step for the requirements `wanted` (after `merged`), the record, the kernel lock's
    digest `base` and the Python the venv is built on."""
    if not wanted:
        return AddedStep.NONE if recorded is None else AddedStep.DROP
    if recorded is not None and (tuple(wanted), base, python) == (
        recorded.requirements,
        recorded.base,
        recorded.python,
    ):
        return AddedStep.KEEP
    return AddedStep.MAKE


def applies(recorded_python: str, build_python: str) -> bool:
    """Whether a recorded added lock goes into a build: only one made for the Python that build uses (a lock made
    for another Python may pin wheels this one cannot install). A session never makes one."""
    return recorded_python == build_python


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One pinned package of a lock: its canonical name, its version and its lines (the pin and its hashes)."""

    name: str
    version: str
    lines: tuple[str, ...]


_PIN = re.compile(rf"({_NAME})==({_VERSION})")


def read_lock(text: str) -> tuple[tuple[str, ...], tuple[LockEntry, ...]]:
    """A lock's option lines (`--find-links ...`) and its entries; comments and blank lines are left out, a pin's
    continuation lines (its `--hash`es) go with it, and a line that is neither is left out."""
    options: list[str] = []
    blocks: list[tuple[str, str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[:1].isspace():
            if current is not None:
                current.append(line)
            continue
        current = None
        if stripped.startswith("-"):
            options.append(stripped)
            continue
        pin = _PIN.fullmatch(stripped.split()[0].rstrip("\\"))
        if pin is not None:
            current = [line]
            blocks.append((canonical(pin.group(1)), pin.group(2), current))
    return tuple(options), tuple(LockEntry(name, version, tuple(lines)) for name, version, lines in blocks)


def pins(text: str) -> tuple[str, ...]:
    """The `name==version` of every package a lock pins (the constraints the added packages resolve under)."""
    return tuple(f"{entry.name}=={entry.version}" for entry in read_lock(text)[1])


def without(text: str, names: Collection[str]) -> str:
    """A lock's text with only its options and the packages not in `names` (canonical): what the kernel lock pins
    already is installed from there."""
    options, entries = read_lock(text)
    kept = [line for entry in entries if entry.name not in names for line in entry.lines]
    return "".join(line + "\n" for line in [*options, *kept])
