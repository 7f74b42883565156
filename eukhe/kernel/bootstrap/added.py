"""Packages the user adds to the kernel venv (`eukhe kernel install --with`): their record and how their lock is
made (the decisions are `eukhe.core.kernel_added`'s).

The record (`kernel-venv.with.json`, beside the venv) holds the requirements, their lock, the kernel lock's digest
and the Python the lock was made for. It is written atomically and read strictly: one that does not decode counts as
absent. The lock is made by `uv pip compile --generate-hashes --only-binary :all:` on the venv's own Python, under
the kernel lock's pins as constraints, with `--emit-find-links` (a local wheel directory stays where a rebuild finds
it); the kernel lock's own packages are then left out of it, so each package is pinned once.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from eukhe.core.fsmode import PRIVATE_DIR_MODE
from eukhe.core.kernel_added import AddedRecord, pins, read_lock, without
from eukhe.errors import InputError
from eukhe.kernel.bootstrap.commands import run_argv
from eukhe.kernel.bootstrap.dir_lock import bootstrap_lock
from eukhe.kernel.bootstrap.venv import KernelPaths, PythonChoice, remove_tree, uv_environment, write_record
from eukhe.records.base import decode_json
from eukhe.records.kernel_env import AddedPackagesRecord

COMPILE_ACTION = "added_compile"
"""The step's name when the lock cannot be made (`eukhe.kernel.bootstrap.errors.HINTS`)."""


def read_added(paths: KernelPaths) -> AddedPackagesRecord | None:
    """The record of the packages the user added, or None (none added, or a record that does not decode)."""
    try:
        return decode_json(
            paths.added.read_bytes(), AddedPackagesRecord, code="bad_setting", what="the added packages' record"
        )
    except (OSError, InputError):
        return None


def choice_text(python: PythonChoice) -> str:
    """A Python choice as the core compares them."""
    return f"{python.source.value} {python.value}"


def as_core(record: AddedPackagesRecord | None) -> AddedRecord | None:
    """The record as the core reads it."""
    if record is None:
        return None
    return AddedRecord(tuple(record.requirements), record.base, choice_text(PythonChoice.of(record.python)))


def lock_digest(lock: Path) -> str:
    """The digest of the kernel lock an added lock is resolved against."""
    return hashlib.sha256(lock.read_bytes()).hexdigest()


def compile_args(uv: Path, python: Path, requirements: Path, constraints: Path, output: Path) -> tuple[str, ...]:
    """Resolve the added requirements into a lock for the venv's Python: wheels only, every one with its hashes,
    the kernel lock's pins kept, the find-links directories written into the lock."""
    return (
        *(str(uv), "pip", "compile", "--quiet", "--python", str(python)),
        *("--generate-hashes", "--only-binary", ":all:", "--emit-find-links", "--no-header", "--no-annotate"),
        *("--constraint", str(constraints), str(requirements), "--output-file", str(output)),
    )


async def make_added(
    uv: Path,
    paths: KernelPaths,
    requirements: tuple[str, ...],
    lock: Path,
    python: PythonChoice,
    *,
    lock_timeout: float | None,
) -> AddedPackagesRecord:
    """Resolve `requirements` into their lock (the install command's only step that reaches an index besides the
    build), under the bootstrap lock, in a staging directory that is removed after."""
    kernel_lock = lock.read_text()
    async with bootstrap_lock(paths.parent, timeout=lock_timeout):
        work = paths.staging()
        os.mkdir(work, PRIVATE_DIR_MODE)
        try:
            wanted, constraints, output = work / "added.in", work / "kernel-pins.txt", work / "added-lock.txt"
            wanted.write_text("".join(line + "\n" for line in requirements))
            constraints.write_text("".join(line + "\n" for line in pins(kernel_lock)))
            argv = compile_args(uv, paths.python, wanted, constraints, output)
            await run_argv(argv, COMPILE_ACTION, uv_environment(paths))
            kernel_names = {entry.name for entry in read_lock(kernel_lock)[1]}
            text = without(output.read_text(), kernel_names)
        finally:
            remove_tree(work)
    return AddedPackagesRecord(
        requirements=list(requirements), lock=text, base=lock_digest(lock), python=python.to_record()
    )


def keep_added(paths: KernelPaths, record: AddedPackagesRecord | None) -> None:
    """Write the record (None: remove it): after the venv built with it is in place."""
    if record is None:
        paths.added.unlink(missing_ok=True)
    else:
        write_record(paths.added, record)
