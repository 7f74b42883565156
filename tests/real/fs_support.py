"""Helpers for the file tools' tests on real files: trees in a temp dir, contexts, refusals, and snapshots of a tree."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from eukhe.core.bound import Keep, On, OutputLimits, Truncation
from eukhe.core.pathmap import Mount, PathMap
from eukhe.fs import FsContext, FsError, Reason
from tests.real.tools import needs_tools

ENGINES = [
    pytest.param("rg", marks=needs_tools("rg")),
    "python",
]
"""The grep engines: every grep test runs with both (rg only where it is installed)."""


def make_tree(root: Path, files: Mapping[str, str | bytes | None]) -> Path:
    """Create files (text or bytes) and directories (None) under root; parents as needed."""
    for relative, content in files.items():
        path = root / relative
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under root: a file's bytes and mode, a link's target, a directory (for 'nothing changed')."""
    found: dict[str, Any] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                found[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                found[relative] = ("dir",)
            else:
                found[relative] = ("file", path.read_bytes(), path.stat().st_mode)
    return found


def local(root: Path, truncation: Truncation | None = None, artifacts: Path | None = None) -> FsContext:
    """A Local context in `root`."""
    if truncation is None:
        return FsContext(root, artifact_dir=artifacts)
    return FsContext(root, truncation, artifacts)


def wrapped(
    host_cwd: Path, mounts: Mapping[str, Path], sandbox_cwd: str | None = None, truncation: Truncation | None = None
) -> FsContext:
    """A wrapped kernel's context: mounts as {sandbox: host dir}."""
    path_map = PathMap(tuple(Mount(sandbox, str(host)) for sandbox, host in mounts.items()))
    if truncation is None:
        return FsContext(host_cwd, path_map=path_map, sandbox_cwd=sandbox_cwd)
    return FsContext(host_cwd, truncation, path_map=path_map, sandbox_cwd=sandbox_cwd)


def small_limits(max_bytes: int, max_lines: int) -> Truncation:
    return On(OutputLimits(max_bytes, max_lines, Keep.TAIL))


def refused(call: Callable[[], object], reason: Reason) -> FsError:
    """Run a call that must raise FsError with this reason; the error."""
    with pytest.raises(FsError) as caught:
        call()
    assert caught.value.reason is reason, (caught.value.reason, caught.value.message)
    assert caught.value.version == "transport@1"
    return caught.value


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target
