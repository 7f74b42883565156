"""Where eukhe keeps its state: the agent dir, the sessions root, the kernel venv (environment overrides)."""

from __future__ import annotations

import os
from pathlib import Path


def agent_dir() -> Path:
    """`EUKHE_CODING_AGENT_DIR`, else `~/.eukhe`."""
    configured = os.environ.get("EUKHE_CODING_AGENT_DIR")
    return Path(configured) if configured else Path.home() / ".eukhe"


def sessions_root() -> Path:
    """`EUKHE_SESSION_DIR`, else `<agent dir>/sessions`."""
    configured = os.environ.get("EUKHE_SESSION_DIR")
    return Path(configured) if configured else agent_dir() / "sessions"


def kernel_venv_dir() -> Path:
    """`EUKHE_KERNEL_VENV`, else `<agent dir>/kernel-venv`."""
    configured = os.environ.get("EUKHE_KERNEL_VENV")
    return Path(configured) if configured else agent_dir() / "kernel-venv"


def workspaces_root(sessions: Path | None = None) -> Path:
    """`EUKHE_WORKSPACE_DIR`, else `workspaces` beside the sessions root (by default `<agent dir>/workspaces`):
    where isolated children's workspaces live, `<root>/<parent session>/<child>/`."""
    configured = os.environ.get("EUKHE_WORKSPACE_DIR")
    if configured:
        return Path(configured)
    return (sessions if sessions is not None else sessions_root()).parent / "workspaces"
