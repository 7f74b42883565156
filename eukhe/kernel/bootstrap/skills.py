"""Python skills in the kernel venv (spec "The kernel environment" 2): a user's skill whose directory holds a
pyproject.toml is installed from that directory with uv, `--offline`, like the runtime. A project's skill never is
(`eukhe.core.skills.installed_on_host`): its build backend would be code a confined job may have written, run on
the host, and the venv is shared by every session; it is imported from its source instead.

The venv keeps the fingerprint of the skill directories it holds (`eukhe-skills.json`): `eukhe kernel install`, a
rebuild (a new venv holds no record) and a session's kernel start whose skills' fingerprint differs install them
again. A skill that fails is named with uv's message; the others and the kernel go on. A venv whose record names a
skill outside the user's roots (installed by an eukhe that installed project skills too) is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import msgspec

from eukhe.beneath import read_regular
from eukhe.core.skills import ROOTS, Scope, installed_on_host
from eukhe.errors import InputError
from eukhe.kernel.bootstrap.commands import run_argv
from eukhe.kernel.bootstrap.dir_lock import bootstrap_lock
from eukhe.kernel.bootstrap.errors import KernelSetupError
from eukhe.kernel.bootstrap.uvtool import find_uv
from eukhe.kernel.bootstrap.venv import KernelPaths, kernel_paths, skill_install_args, uv_environment, write_record
from eukhe.records.base import Record, decode_json
from eukhe.skills import discover, roots
from eukhe.skills.files import FILE_CAP, SkillDir, list_files, refusal

SKILLS_RECORD = "eukhe-skills.json"
"""In the venv: the fingerprint of the Python skills last installed, and how each install went."""


@dataclass(frozen=True, slots=True)
class PythonSkill:
    """An offered skill that is a Python package: its name and directory."""

    name: str
    dir: Path


class SkillInstall(Record):
    """How one Python skill's install went: `error` is uv's message when it failed."""

    name: str
    dir: str
    error: str | None = None


class SkillsRecord(Record):
    """The venv's skills record."""

    fingerprint: str
    skills: list[SkillInstall] = msgspec.field(default_factory=list)


def python_skills(cwd: str | os.PathLike[str]) -> list[PythonSkill]:
    """The offered Python skills eukhe installs into the venv, by name: the user's only (a project's skill is
    imported from its source)."""
    return [
        PythonSkill(fields.name, Path(fact.skill_file).parent)
        for fields, fact in discover(cwd).offered()
        if installed_on_host(fact)
    ]


def fingerprint(skills: list[PythonSkill]) -> str:
    """A hash of each skill's name, directory and every file's path and bytes: any change makes another one. The
    files are read as every skill's are (`eukhe.skills.files`): one over the cap counts by its size and time."""
    digest = hashlib.sha256()
    for skill in skills:
        digest.update(f"skill {skill.name} {skill.dir}\n".encode())
        try:
            with SkillDir(str(skill.dir)).opened() as dir_fd:
                for relative in list_files(dir_fd):
                    digest.update(_file_print(dir_fd, relative))
        except OSError as error:
            digest.update(f"unreadable {error}\n".encode())
    return digest.hexdigest()


def _file_print(dir_fd: int, relative: str) -> bytes:
    """What one file adds to the fingerprint: its path and bytes, or why it was not read and what its metadata
    says."""
    try:
        data = read_regular(relative, FILE_CAP, dir_fd=dir_fd)
    except OSError as error:
        try:
            info = os.stat(relative, dir_fd=dir_fd, follow_symlinks=False)
            seen = f"{info.st_size} {info.st_mtime_ns}"
        except OSError:
            seen = "gone"
        return f"{relative} unread ({refusal(error, FILE_CAP)}) {seen}\n".encode()
    return f"{relative} {len(data)}\n".encode() + data


def user_roots() -> set[str]:
    """The user's skills roots, as paths (those whose skills eukhe installs)."""
    return {str(path) for index, path in roots("/") if ROOTS[index][0] is Scope.USER}


def holds_project_skills(paths: KernelPaths) -> bool:
    """Whether the venv's record names a skill that is not in one of the user's roots: the venv may hold a project's
    package (installed by an eukhe that installed project skills too), so it must be rebuilt."""
    record = read_skills_record(paths)
    if record is None:
        return False
    users = user_roots()
    return any(str(Path(skill.dir).parent) not in users for skill in record.skills)


def read_skills_record(paths: KernelPaths) -> SkillsRecord | None:
    """The venv's skills record, or None when it has none (a new venv) or it cannot be read."""
    try:
        return decode_json(
            (paths.venv / SKILLS_RECORD).read_bytes(), SkillsRecord, code="bad_setting", what="the skills record"
        )
    except (OSError, InputError):
        return None


def uv_message(output: str) -> str:
    """uv's message on one line: its lines without the one saying which environment it used."""
    lines = (line.strip() for line in output.splitlines())
    return " ".join(line for line in lines if line and not line.startswith("Using Python "))


async def install_skills(
    skills: list[PythonSkill], paths: KernelPaths | None = None, *, uv: Path | None = None
) -> SkillsRecord:
    """Install each skill into the venv from its directory, `--offline`; record the fingerprint and each outcome.
    Hold the bootstrap lock. A failing skill's entry carries uv's message; the others install all the same."""
    paths = paths or kernel_paths()
    uv = uv or find_uv()
    env = uv_environment(paths)
    done: list[SkillInstall] = []
    for skill in skills:
        if uv is None:
            done.append(SkillInstall(name=skill.name, dir=str(skill.dir), error="no uv found to install it with"))
            continue
        try:
            await run_argv(skill_install_args(uv, paths.python, skill.dir), f"install skill {skill.name}", env)
        except (KernelSetupError, OSError) as error:
            message = uv_message(error.output) if isinstance(error, KernelSetupError) else str(error)
            done.append(SkillInstall(name=skill.name, dir=str(skill.dir), error=message or str(error)))
        else:
            done.append(SkillInstall(name=skill.name, dir=str(skill.dir)))
    record = SkillsRecord(fingerprint=fingerprint(skills), skills=done)
    write_record(paths.venv / SKILLS_RECORD, record)
    return record


async def ensure_skills(
    cwd: str | os.PathLike[str], paths: KernelPaths | None = None, *, lock_timeout: float | None = 900.0
) -> SkillsRecord | None:
    """The Python skills for `cwd` installed in the venv: installed again (under the bootstrap lock) when their
    fingerprint differs from the venv's record; None when there is no venv to install into."""
    paths = paths or kernel_paths()
    if not paths.python.exists():
        return None
    skills = python_skills(cwd)
    wanted = fingerprint(skills)
    record = read_skills_record(paths)
    if record is not None and record.fingerprint == wanted:
        return record
    async with bootstrap_lock(paths.parent, timeout=lock_timeout):
        record = read_skills_record(paths)
        if record is not None and record.fingerprint == fingerprint(skills):
            return record  # installed by another meanwhile
        return await install_skills(skills, paths)


def failures(record: SkillsRecord | None) -> list[str]:
    """One line per skill that failed to install: its name and uv's message."""
    if record is None:
        return []
    return [
        f"the Python skill {skill.name} ({skill.dir}) did not install: {skill.error}"
        for skill in record.skills
        if skill.error is not None
    ]
