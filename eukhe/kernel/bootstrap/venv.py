"""The kernel venv: where it lives, its build id and stamp, and the uv commands of the core's plan.

`venv_build_commands` writes each command of a `Build` plan as uv's argv, `--offline` exactly where the plan says;
`build_venv` runs them in a staging directory and stamps the venv "checked, for this build" only after `uv pip check`
passed, then renames it into place: a half-built venv is never at the venv path, and never stamped.

The build id hashes what the venv is made of: the lock file, the runtime's local sources (the build backend,
its pyproject and every file of the `eukhe_kernel` package), the pinned Python version, and the lock of the packages
the user added (`eukhe kernel install --with`), when there is one for the venv's Python. A venv stamped with
another id is STALE (after an update) and a session rebuilds it offline.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eukhe.core.fsmode import PRIVATE_DIR_MODE
from eukhe.core.kernel_local import LOCK_NAME, Action, Build, PythonSource, VenvState
from eukhe.errors import InputError
from eukhe.fsio import atomic_write
from eukhe.kernel.bootstrap.commands import run_argv
from eukhe.paths import agent_dir, kernel_venv_dir
from eukhe.private_fs import make_private_dirs
from eukhe.records.base import Record, decode_json, encode
from eukhe.records.kernel_env import KernelStamp, PythonChoiceRecord

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
"""The runtime's packaging (pyproject.toml, its stdlib-only build backend) and the lock files."""
KERNEL_LOCK = RUNTIME_DIR / "requirements-kernel.txt"
"""The kernel's requirements, every one pinned with its hashes."""
RUNTIME_PACKAGING = ("pyproject.toml", "eukhe_runtime_build.py")
KERNEL_PYTHON_VERSION = "3.11.18"
"""The Python uv installs for the kernel (uv checks the download against the sha256 it pins for this version)."""
ADDED_LOCK_NAME = "added-lock.txt"
"""In a staging directory: the added packages' lock, as uv reads it."""
STAMP_NAME = "eukhe-kernel-stamp.json"
"""In the venv: written last, after `uv pip check` passed. No stamp: not checked."""

_COUNTER = itertools.count()


@dataclass(frozen=True, slots=True)
class PythonChoice:
    """The venv's base Python: uv's pinned version (MANAGED) or an existing interpreter (GIVEN, its path)."""

    source: PythonSource
    value: str  # the version request for MANAGED, the interpreter's absolute path for GIVEN

    def to_record(self) -> PythonChoiceRecord:
        """As the stamp and the install record store it."""
        return PythonChoiceRecord(
            source="managed" if self.source is PythonSource.MANAGED else "given", value=self.value
        )

    @staticmethod
    def of(record: PythonChoiceRecord) -> PythonChoice:
        """From its record."""
        return PythonChoice(PythonSource(record.source), record.value)


MANAGED_PYTHON = PythonChoice(PythonSource.MANAGED, KERNEL_PYTHON_VERSION)


@dataclass(frozen=True, slots=True)
class KernelPaths:
    """Every path of the kernel environment, from the venv path (`EUKHE_KERNEL_VENV` or `<agent dir>/kernel-venv`)."""

    venv: Path
    python_installs: Path  # UV_PYTHON_INSTALL_DIR for the Pythons uv installs for the kernel

    @property
    def parent(self) -> Path:
        """The directory that holds the venv, its bootstrap lock, its staging dirs and its install record."""
        return self.venv.parent

    @property
    def lock(self) -> Path:
        """The bootstrap lock."""
        return self.parent / LOCK_NAME

    @property
    def record(self) -> Path:
        """The last install's record: which Python the venv is built on (a session rebuild uses the same)."""
        return self.parent / f"{self.venv.name}.install.json"

    @property
    def added(self) -> Path:
        """The packages the user added (`--with`) and their lock: kept beside the venv, so a rebuild has them."""
        return self.parent / f"{self.venv.name}.with.json"

    @property
    def stamp(self) -> Path:
        """The venv's stamp."""
        return self.venv / STAMP_NAME

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return self.venv / "bin" / "python"

    def staging(self) -> Path:
        """A fresh staging directory name beside the venv (only the lock holder makes one)."""
        return self.parent / f"{self.venv.name}.staging-{os.getpid()}-{next(_COUNTER)}"

    def leftovers(self) -> list[Path]:
        """Staging and set-aside venv directories a killed build left (removed by the next lock holder)."""
        if not self.parent.is_dir():
            return []
        prefixes = (f"{self.venv.name}.staging-", f"{self.venv.name}.old-")
        return sorted(p for p in self.parent.iterdir() if p.name.startswith(prefixes))


def kernel_paths() -> KernelPaths:
    """The paths for this environment (the agent dir and `EUKHE_KERNEL_VENV` settings)."""
    return KernelPaths(venv=kernel_venv_dir(), python_installs=agent_dir() / "kernel-python")


def kernel_package_dir() -> Path:
    """The `eukhe_kernel` package's directory (found without importing it)."""
    spec = importlib.util.find_spec("eukhe_kernel")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the eukhe_kernel package is not importable")
    return Path(spec.origin).resolve().parent


def runtime_sources(package_dir: Path | None = None) -> list[tuple[str, Path]]:
    """The runtime's local files, as (path in the runtime source tree, file), sorted: packaging then the package."""
    package = package_dir or kernel_package_dir()
    files = [(name, RUNTIME_DIR / name) for name in RUNTIME_PACKAGING]
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((f"eukhe_kernel/{path.relative_to(package).as_posix()}", path))
    return files


def build_id(lock: Path = KERNEL_LOCK, package_dir: Path | None = None, added: str | None = None) -> str:
    """The id of what a venv built now is made of: lock, runtime sources, pinned Python version, and the added
    packages' lock when a build installs one (without one, the id is what it always was)."""
    digest = hashlib.sha256()
    digest.update(f"python {KERNEL_PYTHON_VERSION}\n".encode())
    digest.update(b"lock\n" + lock.read_bytes())
    if added is not None:
        digest.update(b"\nadded\n" + added.encode())
    for name, path in runtime_sources(package_dir):
        data = path.read_bytes()
        digest.update(f"\n{name} {len(data)}\n".encode() + data)
    return digest.hexdigest()


def assemble_runtime(target: Path, package_dir: Path | None = None) -> str:
    """Copy the runtime's local files into `target` (the directory uv installs from); return their hash."""
    digest = hashlib.sha256()
    for name, path in runtime_sources(package_dir):
        data = path.read_bytes()
        destination = target / name
        make_private_dirs(destination.parent)
        destination.write_bytes(data)
        digest.update(f"{name} {hashlib.sha256(data).hexdigest()}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Stamp:
    """What a checked venv records: its build id and its base Python."""

    build: str
    python: PythonChoice

    def to_record(self) -> KernelStamp:
        """As written to the stamp file."""
        return KernelStamp(checked=True, build=self.build, python=self.python.to_record())


def read_stamp(venv: Path) -> Stamp | None:
    """The venv's stamp, or None if it is missing, unreadable or does not say checked."""
    try:
        stamp = decode_json((venv / STAMP_NAME).read_bytes(), KernelStamp, code="bad_setting", what="the venv's stamp")
    except (OSError, InputError):
        return None
    return Stamp(stamp.build, PythonChoice.of(stamp.python)) if stamp.checked else None


def read_record(paths: KernelPaths) -> PythonChoice | None:
    """The last install's Python, or None if nothing was installed."""
    try:
        record = decode_json(
            paths.record.read_bytes(), PythonChoiceRecord, code="bad_setting", what="the install record"
        )
    except (OSError, InputError):
        return None
    return PythonChoice.of(record)


def write_record(path: Path, record: Record) -> None:
    """Write a record as JSON beside `path` and rename it over, durably: readers see the old or the new file."""
    atomic_write(path, encode(record) + b"\n")


def venv_state(paths: KernelPaths, current_build: str, wanted: PythonChoice | None) -> VenvState:
    """The venv's state for the core: READY only with a valid stamp for this build (and the wanted Python)."""
    if not paths.venv.exists():
        return VenvState.ABSENT
    stamp = read_stamp(paths.venv)
    if stamp is None or not paths.python.exists():  # a venv whose base Python is gone is not usable
        return VenvState.UNCHECKED
    if stamp.build != current_build or (wanted is not None and stamp.python != wanted):
        return VenvState.STALE
    return VenvState.READY


@dataclass(frozen=True, slots=True)
class BuildCommand:
    """One uv command of a plan: the core's action and the argv the shell runs."""

    action: Action
    argv: tuple[str, ...]


def venv_build_commands(
    plan: Build,
    *,
    uv: Path,
    python: PythonChoice,
    venv: Path,
    lock: Path,
    runtime_source: Path,
    added_lock: Path | None = None,
) -> list[BuildCommand]:
    """The uv argv of each command of the plan, `--offline` exactly where the plan says; the added packages' lock
    (hash-pinned too) is installed with the kernel lock, in one resolution."""
    venv_python = str(venv / "bin" / "python")
    commands: list[BuildCommand] = []
    for command in plan.commands:
        offline = ["--offline"] if command.offline else []
        if command.action is Action.PYTHON_INSTALL:
            argv = [str(uv), "python", "install", *offline, "--no-bin", python.value]
        elif command.action is Action.VENV:
            managed = ["--managed-python"] if python.source is PythonSource.MANAGED else ["--no-managed-python"]
            argv = [str(uv), "venv", *offline, "--no-python-downloads", *managed, "--no-project", "--relocatable"]
            argv += ["--python", python.value, str(venv)]
        elif command.action is Action.LOCK_INSTALL:
            argv = [str(uv), "pip", "install", *offline, "--python", venv_python]
            argv += ["--require-hashes", "--only-binary", ":all:", "-r", str(lock)]
            argv += ["-r", str(added_lock)] if added_lock is not None else []
        elif command.action is Action.RUNTIME_INSTALL:
            argv = [str(uv), "pip", "install", *offline, "--python", venv_python, "--no-deps", str(runtime_source)]
        else:
            argv = [str(uv), "pip", "check", *offline, "--python", venv_python]
        commands.append(BuildCommand(command.action, tuple(argv)))
    return commands


def skill_install_args(uv: Path, venv_python: Path, skill_dir: Path) -> tuple[str, ...]:
    """Install a Python skill into the kernel venv from its directory, like the runtime: local files, `--offline`."""
    return (str(uv), "pip", "install", "--offline", "--python", str(venv_python), "--no-deps", str(skill_dir))


def uv_environment(paths: KernelPaths, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every uv command: uv's Python installs for the kernel live under the agent dir."""
    env = dict(os.environ if base is None else base)
    env["UV_PYTHON_INSTALL_DIR"] = str(paths.python_installs)
    env.pop("VIRTUAL_ENV", None)  # the commands name their venv; an active one must not leak in
    env.setdefault("UV_NO_PROGRESS", "1")
    return env


async def run_command(command: BuildCommand, env: Mapping[str, str]) -> str:
    """Run one uv command of a plan (see `run_argv`)."""
    return await run_argv(command.argv, command.action.value, env)


def remove_tree(path: Path) -> None:
    """Remove a directory (or a file or symlink) if it is there."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def remove_leftovers(paths: KernelPaths) -> None:
    """Remove staging and set-aside venvs of builds that did not finish (only the lock holder calls this)."""
    for leftover in paths.leftovers():
        remove_tree(leftover)


async def build_venv(
    plan: Build,
    *,
    uv: Path,
    python: PythonChoice,
    paths: KernelPaths,
    current_build: str,
    lock: Path = KERNEL_LOCK,
    package_dir: Path | None = None,
    ran: list[BuildCommand] | None = None,
    added: str | None = None,
) -> None:
    """Run the plan in a staging dir, stamp it after the check, rename it into place. Hold the bootstrap lock.
    `added`: the added packages' lock text, installed with the kernel lock."""
    remove_leftovers(paths)
    staging = paths.staging()
    os.mkdir(staging, PRIVATE_DIR_MODE)
    try:
        source = staging / "runtime-src"
        assemble_runtime(source, package_dir)
        venv = staging / "venv"
        env = uv_environment(paths)
        added_lock = None
        if added is not None:
            added_lock = staging / ADDED_LOCK_NAME
            added_lock.write_text(added)
        commands = venv_build_commands(
            plan, uv=uv, python=python, venv=venv, lock=lock, runtime_source=source, added_lock=added_lock
        )
        for command in commands:
            if ran is not None:
                ran.append(command)
            await run_command(command, env)
        # Stamp last: only a venv whose every command ran and whose check passed is ever stamped.
        write_record(venv / STAMP_NAME, Stamp(current_build, python).to_record())
        old = paths.parent / f"{paths.venv.name}.old-{os.getpid()}-{next(_COUNTER)}"
        if paths.venv.exists() or paths.venv.is_symlink():
            os.rename(paths.venv, old)
        os.rename(venv, paths.venv)
        write_record(paths.record, python.to_record())
        remove_tree(old)
    finally:
        with contextlib.suppress(OSError):
            remove_tree(staging)
