"""The tools some real tests run that the README's two commands do not install (those install uv and the locked
packages only). .ci/run installs each; where one is not on PATH, a test that needs it skips and names the package
and .ci/run: it never fails for that reason."""

from __future__ import annotations

import shutil

import pytest

PACKAGES = {
    "bwrap": "bubblewrap",
    "curl": "curl",
    "filefrag": "e2fsprogs",
    "git": "git",
    "mkfs.xfs": "xfsprogs",
    "mount": "util-linux",
    "rg": "ripgrep",
    "setsid": "util-linux",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "sshd": "openssh-server",
    "umount": "util-linux",
    "unshare": "util-linux",
}
"""Each tool, by the name it is run as, and the package that has it (as .ci/run installs it)."""


def tool(name: str) -> str | None:
    """Where the tool `name` is on PATH (the name a test or eukhe runs it by), or None."""
    assert name in PACKAGES, f"{name} is not a tool .ci/run installs"
    return shutil.which(name)


def missing_reason(*names: str) -> str | None:
    """The skip reason for the tools of `names` that are not on PATH ("needs bubblewrap (installed by .ci/run)"),
    or None when all are there."""
    packages = dict.fromkeys(PACKAGES[name] for name in names if tool(name) is None)
    if not packages:
        return None
    return f"needs {', '.join(packages)} (installed by .ci/run)"


def need_tools(*names: str) -> None:
    """Skip the running test unless every tool of `names` is on PATH."""
    reason = missing_reason(*names)
    if reason is not None:
        pytest.skip(reason)


def needs_tools(*names: str) -> pytest.MarkDecorator:
    """A mark that skips a test unless every tool of `names` is on PATH."""
    reason = missing_reason(*names)
    return pytest.mark.skipif(reason is not None, reason=reason or "")
