"""The kernel environment's records (spec "The kernel environment"): its files (the venv's stamp, the install
record) and what `eukhe kernel install` answers.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from eukhe.records.base import Record


class PythonChoiceRecord(Record):
    """An interpreter for the kernel venv: where it comes from (`managed`: uv's pinned version; `given`: an existing
    interpreter's path) and that pin or path. The install record (`kernel-venv.install.json`) is one."""

    source: Literal["managed", "given"]
    value: str


class KernelStamp(Record):
    """The venv's stamp (`eukhe-kernel-stamp.json`), written last, once `uv pip check` passed."""

    checked: bool
    build: str
    python: PythonChoiceRecord


class AddedPackagesRecord(Record):
    """`kernel-venv.with.json`: the packages the user added (`eukhe kernel install --with`), their lock (every wheel
    with its hashes; the kernel lock's own packages left out), the digest of the kernel lock it was resolved
    against and the Python it was resolved for (a build on another Python leaves it out)."""

    requirements: list[str]
    lock: str
    base: str
    python: PythonChoiceRecord


class KernelState(Record):
    """`eukhe kernel install --check --json`: the kernel environment's state, from local files only."""

    state: str
    ready: bool
    user_python: str | None
    venv: str
    python: str | None
    base_python: PythonChoiceRecord | None
    installed_with: PythonChoiceRecord | None
    build: str
    venv_build: str | None
    lock: str
    uv: str | None
    python_version_pin: str
    added_packages: list[str] = msgspec.field(default_factory=list)
    """What `eukhe kernel install --with` added (the record beside the venv)."""


class KernelInstalled(Record):
    """`eukhe kernel install --json`: the Python the kernel runs on, whether it built, the commands it ran."""

    python: str
    built: bool
    user_python: bool
    commands: list[list[str]]
    added_packages: list[str] = msgspec.field(default_factory=list)
    """The packages added with `--with`, all of them (those of earlier installs too)."""
