"""Finding uv, the one tool that builds the kernel venv, and installing it (hash-pinned) when it is missing.

Order: `$UV` (set by `uv run`), the `uv` package in this interpreter, `uv` on PATH, the copy eukhe installed before
in `<agent dir>/tools/uv`. Only the install command may install uv (a session never downloads): into its own venv
under the agent dir, with pip `--require-hashes` on `runtime/requirements-uv.txt`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from eukhe.kernel.bootstrap.commands import run_argv
from eukhe.kernel.bootstrap.errors import UvNotFoundError
from eukhe.paths import agent_dir
from eukhe.private_fs import make_private_dirs

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
UV_LOCK = RUNTIME_DIR / "requirements-uv.txt"


def _executable(path: str | os.PathLike[str] | None) -> Path | None:
    if not path:
        return None
    candidate = Path(path)
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def tools_venv() -> Path:
    """Where eukhe installs its own uv when none is found."""
    return agent_dir() / "tools" / "uv"


def find_uv() -> Path | None:
    """The uv binary to use, or None when there is none on this machine."""
    found = _executable(os.environ.get("UV"))
    if found:
        return found
    if importlib.util.find_spec("uv") is not None:
        import uv  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 - optional, only when present

        try:
            found = _executable(uv.find_uv_bin())
        except FileNotFoundError:
            found = None
        if found:
            return found
    found = _executable(shutil.which("uv"))
    if found:
        return found
    return _executable(tools_venv() / "bin" / "uv")


async def ensure_uv(*, may_install: bool) -> Path:
    """uv, found or (for the install command only) installed with its hashes checked."""
    found = find_uv()
    if found is not None:
        return found
    if not may_install:
        raise UvNotFoundError("uv was not found; `eukhe kernel install` installs it")
    target = tools_venv()
    shutil.rmtree(target, ignore_errors=True)
    make_private_dirs(target.parent)  # the agent dir and tools/ are eukhe's: 0700 at creation
    await run_argv([sys.executable, "-m", "venv", str(target)], "uv_venv")
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    await run_argv([*pip, "--require-hashes", "--only-binary", ":all:", "-r", str(UV_LOCK)], "uv_install")
    found = _executable(target / "bin" / "uv")
    if found is None:
        raise UvNotFoundError(f"installed uv into {target} but found no uv binary there")
    return found
