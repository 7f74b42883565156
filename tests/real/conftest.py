"""Fixtures for real daemon tests: a private TMPDIR and agent dir per test, CLI runs, and a daemon always stopped."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class DaemonEnv:
    """A private world for one test: TMPDIR (socket dir inside), agent dir, the env the CLI runs with."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def tmpdir(self) -> Path:
        return self.root / "t"

    @property
    def agent_dir(self) -> Path:
        return self.root / "agent"

    @property
    def socket_dir(self) -> Path:
        return self.tmpdir / f"eukhe-{os.getuid()}"

    @property
    def socket(self) -> Path:
        return self.socket_dir / "daemon.sock"

    @property
    def log(self) -> Path:
        return self.agent_dir / "daemon.log"

    def cli(self, *args: str, timeout: float = 60, umask: int = -1) -> subprocess.CompletedProcess[str]:
        """Run `eukhe ARGS` in a subprocess with this world's environment."""
        return subprocess.run(
            [sys.executable, "-m", "eukhe.cli.main", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            umask=umask,
            check=False,
        )

    def json(self, *args: str, timeout: float = 60) -> Any:
        """Run `eukhe ARGS --json`; the one JSON value it prints (fails the test on a non-zero exit)."""
        done = self.cli(*with_json(args), timeout=timeout)
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return json.loads(done.stdout)

    def json_error(self, *args: str, timeout: float = 60) -> tuple[int, dict[str, Any]]:
        """Run `eukhe ARGS --json` expecting an error: (exit code, {error, message})."""
        done = self.cli(*with_json(args), timeout=timeout)
        assert done.returncode != 0, done.stdout
        return done.returncode, json.loads(done.stdout)

    def daemon_pid(self) -> int | None:
        done = self.cli("daemon", "status", "--json")
        if done.returncode != 0:
            return None
        return int(json.loads(done.stdout)["pid"])

    def stop(self) -> None:
        """Stop the daemon if one runs; kill it (and its workers) if it does not stop."""
        pid = self.daemon_pid()
        self.cli("daemon", "stop")
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def with_json(args: Sequence[str]) -> list[str]:
    """ARGS with --json added before a `--` (after it, it would be part of the command)."""
    words = list(args)
    at = words.index("--") if "--" in words else len(words)
    return [*words[:at], "--json", *words[at:]]


def make_env(root: Path) -> DaemonEnv:
    world = DaemonEnv(root)
    world.tmpdir.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EUKHE_")}
    env.update(TMPDIR=str(world.tmpdir), EUKHE_CODING_AGENT_DIR=str(world.agent_dir), HOME=str(root / "home"))
    world.env = env
    return world


@pytest.fixture
def world() -> Iterator[DaemonEnv]:
    """A private world (short path: socket paths must stay under 108 bytes); its daemon is stopped at the end."""
    root = Path(tempfile.mkdtemp(prefix="ek", dir="/tmp"))
    world = make_env(root)
    try:
        yield world
    finally:
        world.stop()
        shutil.rmtree(root, ignore_errors=True)


def run_all(cmds: Sequence[Sequence[str]], world: DaemonEnv) -> list[subprocess.CompletedProcess[str]]:
    return [world.cli(*cmd) for cmd in cmds]
