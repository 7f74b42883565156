"""The one place that says how the Local transport starts a kernel (S3 "Where the sandbox runs" 1, 7).

The argv and environment come from here only. `kernel_launch()` runs the stub on the project's own interpreter;
`installed_kernel_launch()` runs it on the installed kernel venv (`ensure_kernel_python`, spec "The kernel
environment"), raising `KernelNotInstalledError` when local files are not enough. `KernelManager(launch=...)` takes
either. `with_skills` adds the Agent Skills of the session's cwd: their listing for `rlm.skills()`, and each Python
skill either installed into the kernel venv (a user's, on the venv) or imported from its source, its directory in
front of `PYTHONPATH` (a project's always: its code never builds or runs on the host).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from eukhe.core.own_launch import without_own_launch
from eukhe.core.own_secrets import without_own_secrets
from eukhe_kernel.snapshot import SNAPSHOT_VARIABLE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from eukhe.sandbox.confine import Confinement

SKILLS_VARIABLE = "EUKHE_KERNEL_SKILLS"
"""The offered skills, as JSON, for `rlm.skills()` (eukhe_kernel/rlm/skills.py reads it)."""
OWNER_PID_VARIABLE = "EUKHE_KERNEL_OWNER_PID"
OWNER_VARIABLE = "EUKHE_KERNEL_OWNER"


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """The kernel's argv and its whole environment; `preamble`: bytes written to its stdin before the first request
    (a wrapped kernel's stub, sent over the wrapper); `cwd`: where the command starts (None: the session's cwd;
    a wrapped kernel moves to its sandbox path itself); `diagnostics`: what the launch has to say (a host variable
    left out of a wrapped kernel's environment)."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    preamble: bytes = b""
    cwd: str | None = None
    diagnostics: tuple[str, ...] = ()
    snapshot: bool = False
    """Whether the kernel has a namespace snapshot file (`EUKHE_KERNEL_SNAPSHOT` in its environment)."""
    host_pids: bool = True
    """Whether the pids the kernel reports are the host's (a Local kernel), so the host may signal them; a wrapped
    or confined kernel lives in a pid namespace of its own and reaps its own children."""
    pid_namespace: bool = False
    """Whether the command is bwrap with a pid namespace of its own: the kernel's end waits for that namespace."""


def kernel_python() -> str:
    """The interpreter the kernel runs on (until the kernel venv lands: the project's own)."""
    return sys.executable


def kernel_launch(python: str | None = None, *, stub_on_path: bool = True) -> KernelLaunch:
    """Local transport: `<python> -m eukhe_kernel`, the host's environment plus the owner pid the stub watches.

    `stub_on_path` puts this tree's `eukhe_kernel` first on PYTHONPATH, for an interpreter that does not have the
    stub installed (the project's own, or a user's `EUKHE_KERNEL_PYTHON`); the kernel venv has its own copy.
    """
    env = without_own_launch(without_own_secrets(os.environ), (sys.prefix, os.path.realpath(sys.prefix)))
    env[OWNER_PID_VARIABLE] = str(os.getpid())
    if stub_on_path:
        package_root = str(Path(__file__).resolve().parents[2])  # where eukhe_kernel lives, for an uninstalled tree
        existing = env.get("PYTHONPATH")
        env["PYTHONPATH"] = package_root + (os.pathsep + existing if existing else "")
    return KernelLaunch((python or kernel_python(), "-m", "eukhe_kernel"), env)


async def installed_kernel_launch() -> KernelLaunch:
    """The Local transport on the installed kernel venv (or `EUKHE_KERNEL_PYTHON`); never downloads."""
    from eukhe.kernel.bootstrap import ensure_kernel_python  # noqa: PLC0415 - only a session that runs cells needs it

    python = await ensure_kernel_python()
    return kernel_launch(str(python), stub_on_path=bool(os.environ.get("EUKHE_KERNEL_PYTHON")))


def confined_launch(launch: KernelLaunch, sandbox: Confinement, *, writable: Sequence[str] = ()) -> KernelLaunch:
    """A Local launch run in the session's sandbox: the same argv under bwrap, the host's environment, and the
    stdin owner rule (the kernel's pid namespace has no host pid to watch: it ends at its stdin's EOF)."""
    env = {name: value for name, value in launch.env.items() if name != OWNER_PID_VARIABLE}
    env[OWNER_VARIABLE] = "stdin"
    argv = sandbox.wrap(list(launch.argv), writable=writable, readable=interpreter_paths(launch))
    return replace(launch, argv=tuple(argv), env=env, host_pids=False, pid_namespace=True)


def interpreter_paths(launch: KernelLaunch) -> list[str]:
    """What a confined kernel must read wherever it lies (under the host's /tmp, which it does not see): its
    interpreter's environment (a venv's root, and the Python it links to) and the stub's PYTHONPATH entries."""
    python = launch.argv[0]
    roots = {
        os.path.dirname(os.path.dirname(os.path.abspath(python))),
        os.path.dirname(os.path.dirname(os.path.realpath(python))),
    }
    roots.update(entry for entry in launch.env.get("PYTHONPATH", "").split(os.pathsep) if entry)
    return sorted(roots)


def with_snapshot(launch: KernelLaunch, path: str) -> KernelLaunch:
    """A Local kernel's launch with its namespace snapshot file (a host path: the kernel runs on the host)."""
    return replace(launch, env={**launch.env, SNAPSHOT_VARIABLE: path}, snapshot=True)


def import_path(skill_dir: str) -> str:
    """Where a Python skill's modules import from: its `src/` when it has one (the src layout: a directory, not a
    symlink), else its dir."""
    source = os.path.join(skill_dir, "src")
    return source if os.path.isdir(source) and not os.path.islink(source) else skill_dir


def skills_environment(
    cwd: str | os.PathLike[str], mapped: Callable[[str], str | None], *, installed: Collection[str] = ()
) -> tuple[dict[str, str], list[str], list[str]]:
    """The kernel's skills entry (`EUKHE_KERNEL_SKILLS`), the Python skills' import paths (each mapped to the
    kernel's path; not for those `installed` by name, whose packages are in the venv) and the diagnostics of those
    left out (no mount holds them): the core's `kernel_skills` for the skills offered in `cwd`."""
    from eukhe.core.skills import kernel_skills  # noqa: PLC0415 - only a kernel start reads the skills
    from eukhe.skills import discover  # noqa: PLC0415

    found = [
        (fields, fact, os.path.dirname(fact.skill_file), import_path(os.path.dirname(fact.skill_file)))
        for fields, fact in discover(cwd).offered()
    ]
    told = kernel_skills(found, mapped, installed=installed)
    rows = [
        {
            "name": skill.name,
            "description": skill.description,
            "scope": skill.scope.value,
            "path": skill.path,
            "python": skill.python,
            "import_path": skill.import_path,
        }
        for skill in told.skills
    ]
    return {SKILLS_VARIABLE: json.dumps(rows)}, list(told.python_path), list(told.left_out)


def in_front(paths: Sequence[str], existing: str | None) -> str:
    """A PYTHONPATH with `paths` in front of `existing`."""
    return os.pathsep.join([*paths, *([existing] if existing else [])])


async def with_skills(launch: KernelLaunch, cwd: str | os.PathLike[str]) -> KernelLaunch:
    """A Local launch with the skills of `cwd`: on the kernel venv each of the user's Python skills is installed
    there first (again when their fingerprint changed; a failure is a diagnostic naming the skill and uv's message,
    and that skill is imported from its source). A project's Python skill is never installed nor built here: it is
    imported from its source, its directory in front of PYTHONPATH, as every skill is on any other interpreter.
    Nothing here stops the kernel's start."""
    from eukhe.errors import EukheError  # noqa: PLC0415
    from eukhe.kernel.bootstrap.skills import ensure_skills, failures  # noqa: PLC0415
    from eukhe.kernel.bootstrap.venv import kernel_paths  # noqa: PLC0415

    diagnostics = list(launch.diagnostics)
    try:
        on_venv = os.path.abspath(launch.argv[0]) == str(kernel_paths().python)
        record = await ensure_skills(cwd) if on_venv else None
        diagnostics += failures(record)
        installed = [] if record is None else [skill.name for skill in record.skills if skill.error is None]
        entry, paths, left_out = skills_environment(cwd, lambda path: path, installed=installed)
    except (EukheError, OSError) as error:
        return replace(launch, diagnostics=(*diagnostics, f"the skills of {cwd} could not be read: {error}"))
    env = {**launch.env, **entry}
    if paths:
        env["PYTHONPATH"] = in_front(paths, env.get("PYTHONPATH"))
    return replace(launch, env=env, diagnostics=(*diagnostics, *left_out))
