"""The kernel's Python for a session and for `eukhe kernel install` (spec "The kernel environment" 1-5).

`setup_step` reads the facts and asks the core for the plan; `ensure_kernel_python` (a session) and
`install_kernel_python` (the command) do what it says, building under the bootstrap lock; `check_state` reports
without changing anything or touching the network.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eukhe.core.kernel_added import AddedStep, applies, merged, plan_added
from eukhe.core.kernel_local import (
    Build,
    KernelMissing,
    Purpose,
    PythonSource,
    Report,
    SetupFacts,
    SetupStep,
    UseInstalled,
    UseUserPython,
    VenvState,
    judge_build_failure,
    plan_setup,
)
from eukhe.errors import EukheError
from eukhe.kernel.bootstrap.added import as_core, choice_text, keep_added, lock_digest, make_added, read_added
from eukhe.kernel.bootstrap.dir_lock import bootstrap_lock
from eukhe.kernel.bootstrap.errors import (
    AddedPackagesError,
    KernelEnvError,
    KernelNotInstalledError,
    KernelSetupError,
    UserPythonMissingError,
)
from eukhe.kernel.bootstrap.uvtool import ensure_uv, find_uv
from eukhe.kernel.bootstrap.venv import (
    KERNEL_LOCK,
    MANAGED_PYTHON,
    BuildCommand,
    KernelPaths,
    PythonChoice,
    build_id,
    build_venv,
    kernel_paths,
    read_record,
    read_stamp,
    venv_state,
)
from eukhe.private_fs import make_private_dirs
from eukhe.records.kernel_env import AddedPackagesRecord, KernelState

USER_PYTHON_VARIABLE = "EUKHE_KERNEL_PYTHON"
_QUERY_PYTHON = (
    "import sys; print(getattr(sys, '_base_executable', sys.executable)); print('%d.%d' % sys.version_info[:2])"
)
"""Asks an interpreter for its real executable (not a venv's or a shim's) and its version."""


@dataclass(frozen=True, slots=True)
class SetupView:
    """The facts the shell read and the core's step for them."""

    facts: SetupFacts
    step: SetupStep
    python: PythonChoice | None  # the Python a build would use (requested for install, recorded for a session)
    build: str
    added: AddedPackagesRecord | None = None  # the added packages a build installs (their lock is for `python`)


class FromRecord:
    """Take the added packages from their record beside the venv (not from the caller)."""


FROM_RECORD = FromRecord()


def user_python() -> str | None:
    """EUKHE_KERNEL_PYTHON, if set (a user Python: eukhe installs nothing)."""
    return os.environ.get(USER_PYTHON_VARIABLE) or None


def setup_step(
    purpose: Purpose,
    paths: KernelPaths,
    *,
    requested: PythonChoice | None = None,
    lock: Path = KERNEL_LOCK,
    package_dir: Path | None = None,
    added: AddedPackagesRecord | FromRecord | None = FROM_RECORD,
) -> SetupView:
    """Read the facts (user Python, the venv's stamp, the last install's record, the added packages' record unless
    `added` is given) and ask the core for the step."""
    recorded = read_record(paths)
    if recorded is None and paths.venv.exists():
        stamp = read_stamp(paths.venv)
        recorded = stamp.python if stamp is not None else None
    chosen = requested if purpose is Purpose.INSTALL else recorded
    extra = read_added(paths) if isinstance(added, FromRecord) else added
    if extra is not None and (
        chosen is None or not applies(choice_text(PythonChoice.of(extra.python)), choice_text(chosen))
    ):
        extra = None  # a lock made for another Python is not installed on this one
    current = build_id(lock, package_dir, None if extra is None else extra.lock)
    wanted = requested if purpose is Purpose.INSTALL else None
    state = venv_state(paths, current, wanted)
    if state is VenvState.READY and _holds_project_skills(paths):
        state = VenvState.STALE  # the venv is every session's: one that may hold a project's package is rebuilt
    facts = SetupFacts(
        purpose=purpose,
        user_python=user_python() is not None,
        venv=state,
        recorded=None if recorded is None else recorded.source,
        requested=(chosen or MANAGED_PYTHON).source,
    )
    return SetupView(facts, plan_setup(facts), chosen, current, extra)


def _holds_project_skills(paths: KernelPaths) -> bool:
    from eukhe.kernel.bootstrap.skills import holds_project_skills  # noqa: PLC0415 - it imports this package

    return holds_project_skills(paths)


@dataclass(slots=True)
class InstallResult:
    """What a setup did: the Python the kernel runs on, whether it built, the commands it ran."""

    python: Path
    built: bool
    commands: list[BuildCommand] = field(default_factory=list)
    user_python: bool = False
    waited: bool = False  # another process held the bootstrap lock first
    skill_failures: list[str] = field(default_factory=list)  # each Python skill that did not install, with uv's text
    added_packages: list[str] = field(default_factory=list)  # what `--with` added, all of it


def _user_python_path() -> Path:
    value = user_python()
    assert value is not None
    path = Path(value)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UserPythonMissingError(value)
    return path


async def _setup(
    purpose: Purpose,
    paths: KernelPaths,
    requested: PythonChoice | None,
    *,
    lock: Path,
    package_dir: Path | None,
    lock_timeout: float | None,
    added: AddedPackagesRecord | FromRecord | None = FROM_RECORD,
) -> InstallResult:
    """Plan; if a build is due, take the bootstrap lock, plan again (someone may have built meanwhile) and build.
    `added` given (the install command's new added packages, or None for none): the build installs them and their
    record is written once the venv is in place, under the same lock."""
    view = setup_step(purpose, paths, requested=requested, lock=lock, package_dir=package_dir, added=added)
    if isinstance(view.step, UseUserPython):
        return InstallResult(_user_python_path(), built=False, user_python=True)
    if isinstance(view.step, UseInstalled) and isinstance(added, FromRecord):
        return InstallResult(paths.python, built=False)
    if isinstance(view.step, KernelMissing):
        raise KernelNotInstalledError("no install record and no checked venv")
    if not isinstance(view.step, Build | UseInstalled):  # pragma: no cover - CHECK never comes here
        raise TypeError(f"unexpected step {view.step!r}")
    uv = await ensure_uv(may_install=purpose is Purpose.INSTALL)
    make_private_dirs(paths.parent)
    async with bootstrap_lock(paths.parent, timeout=lock_timeout) as held:
        view = setup_step(purpose, paths, requested=requested, lock=lock, package_dir=package_dir, added=added)
        if isinstance(view.step, UseInstalled):
            if not isinstance(added, FromRecord):
                keep_added(paths, added)  # the venv is already what these added packages make
            return InstallResult(paths.python, built=False, waited=held.waited)  # built by another meanwhile
        if not isinstance(view.step, Build) or view.python is None:
            raise KernelNotInstalledError("the plan changed under the lock")
        ran: list[BuildCommand] = []
        await build_venv(
            view.step,
            uv=uv,
            python=view.python,
            paths=paths,
            current_build=view.build,
            lock=lock,
            package_dir=package_dir,
            ran=ran,
            added=None if view.added is None else view.added.lock,
        )
        if not isinstance(added, FromRecord):
            keep_added(paths, added)
        return InstallResult(paths.python, built=True, commands=ran, waited=held.waited)


async def ensure_kernel_python(
    paths: KernelPaths | None = None,
    *,
    lock: Path = KERNEL_LOCK,
    package_dir: Path | None = None,
    lock_timeout: float | None = 900.0,
) -> Path:
    """The interpreter a session's kernel runs on: a user Python, the checked venv, or the venv rebuilt offline.

    Raises KernelNotInstalledError (text: "The Python kernel is not installed: run `eukhe kernel install` once") when
    local files are not enough; that error concerns the kernel only, the session and its other tools go on.
    """
    paths = paths or kernel_paths()
    try:
        result = await _setup(
            Purpose.SESSION, paths, None, lock=lock, package_dir=package_dir, lock_timeout=lock_timeout
        )
    except KernelNotInstalledError:
        raise
    except (KernelEnvError, OSError) as error:
        if judge_build_failure(Purpose.SESSION) is not None:
            raise KernelNotInstalledError(str(error)) from error
        raise  # pragma: no cover - the core always answers KernelMissing for a session
    return result.python


async def resolve_given_python(path: str) -> PythonChoice:
    """An existing interpreter named with `--python`, as its real executable (a pyenv shim is not one)."""
    try:
        process = await asyncio.create_subprocess_exec(
            path,
            "-c",
            _QUERY_PYTHON,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:
        raise KernelSetupError("python", [path], 127, f"cannot run {path}: {error.strerror}") from error
    out, err = await process.communicate()
    lines = out.decode(errors="replace").split()
    if process.returncode != 0 or len(lines) != 2:
        raise KernelSetupError("python", [path], process.returncode or 1, err.decode(errors="replace"))
    major, minor = (int(part) for part in lines[1].split("."))
    if (major, minor) < (3, 11):
        raise KernelSetupError("python", [path], 1, f"the kernel needs Python 3.11 or newer, {path} is {lines[1]}")
    return PythonChoice(PythonSource.GIVEN, str(Path(lines[0]).absolute()))


async def install_kernel_python(
    python: str | None = None,
    paths: KernelPaths | None = None,
    *,
    lock: Path = KERNEL_LOCK,
    package_dir: Path | None = None,
    lock_timeout: float | None = 900.0,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
) -> InstallResult:
    """`eukhe kernel install`: the only setup that downloads (a uv Python, the locked wheels); keeps a ready venv.

    `add` (`--with`) and `remove` (`--without`) change the packages the user added to the venv: the venv is
    built first as it is recorded, then (when the core says the added lock must be made again) the lock is made on
    its Python and the venv is built again with it; the record is written once that venv is in place."""
    paths = paths or kernel_paths()
    recorded = read_added(paths)
    wanted = merged([] if recorded is None else recorded.requirements, add, remove)  # a bad name fails first
    if (add or remove) and user_python():
        raise AddedPackagesError(
            "EUKHE_KERNEL_PYTHON is set: the kernel runs on that Python and eukhe installs nothing into it; install "
            "the packages into it yourself, or unset it to use the kernel venv"
        )
    # Without --python, a second run keeps the Python of the last install (so it keeps a ready venv).
    requested = await resolve_given_python(python) if python else (read_record(paths) or MANAGED_PYTHON)
    result = await _setup(
        Purpose.INSTALL, paths, requested, lock=lock, package_dir=package_dir, lock_timeout=lock_timeout
    )
    if result.user_python:
        return result
    stamp = read_stamp(paths.venv)
    assert stamp is not None  # a venv was just kept or built
    step = plan_added(wanted, as_core(recorded), base=lock_digest(lock), python=choice_text(stamp.python))
    if step in (AddedStep.MAKE, AddedStep.DROP):
        uv = await ensure_uv(may_install=True)
        added = None
        if step is AddedStep.MAKE:
            added = await make_added(uv, paths, wanted, lock, stamp.python, lock_timeout=lock_timeout)
        again = await _setup(
            Purpose.INSTALL,
            paths,
            requested,
            lock=lock,
            package_dir=package_dir,
            lock_timeout=lock_timeout,
            added=added,
        )
        result.built = result.built or again.built
        result.commands += again.commands
    result.added_packages = list(wanted)
    result.skill_failures = await _install_skills(paths, lock_timeout)
    return result


async def _install_skills(paths: KernelPaths, lock_timeout: float | None) -> list[str]:
    """The user's Python skills, installed into the venv now (under the lock); a project's skill never is, not
    even the one of the directory this runs in."""
    from eukhe.kernel.bootstrap.skills import failures, install_skills, python_skills  # noqa: PLC0415

    try:
        skills = python_skills(os.getcwd())
    except (KernelEnvError, OSError, EukheError) as error:
        return [f"the skills could not be read: {error}"]
    async with bootstrap_lock(paths.parent, timeout=lock_timeout):
        return failures(await install_skills(skills, paths))


def check_state(paths: KernelPaths | None = None, *, lock: Path = KERNEL_LOCK) -> KernelState:
    """`eukhe kernel install --check`: the state as the core reports it; reads files only, no network."""
    paths = paths or kernel_paths()
    view = setup_step(Purpose.CHECK, paths, lock=lock)
    assert isinstance(view.step, Report)
    stamp = read_stamp(paths.venv) if paths.venv.exists() else None
    user = user_python()
    uv = find_uv()
    state = "user_python" if user else view.step.venv.value
    return KernelState(
        state=state,
        ready=bool(user) or view.step.venv is VenvState.READY,
        user_python=user,
        venv=str(paths.venv),
        python=str(paths.python) if view.step.venv is VenvState.READY else None,
        base_python=stamp.python.to_record() if stamp else None,
        installed_with=view.python.to_record() if view.python else None,
        build=view.build,
        venv_build=stamp.build if stamp else None,
        lock=str(lock),
        uv=str(uv) if uv else None,
        python_version_pin=MANAGED_PYTHON.value,
        added_packages=[] if view.added is None else list(view.added.requirements),
    )
