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
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.real.process_support import Spawned


@dataclass
class DaemonEnv:
    """A private world for one test: TMPDIR (socket dir inside), agent dir, the env the CLI runs with."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    spawned: Spawned = field(default_factory=Spawned)  # what the test started here (`start_cli`): `stop` ends it

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

    def start_cli(self, *args: str, stdout: int = subprocess.PIPE) -> subprocess.Popen[str]:
        """Start `eukhe ARGS` with this world's environment (stderr piped, text); `stop` ends it if it still runs
        and closes its pipes, so a test that fails while it runs leaves nothing behind."""
        process = subprocess.Popen(
            [sys.executable, "-m", "eukhe.cli.main", *args],
            env=self.env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
        )
        return self.spawned.add(process)

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

    def json_any(self, *args: str, timeout: float = 60) -> tuple[int, Any]:
        """Run `eukhe ARGS --json` whatever its exit: (exit code, the JSON value it printed)."""
        done = self.cli(*with_json(args), timeout=timeout)
        return done.returncode, json.loads(done.stdout)

    def daemon_pid(self) -> int | None:
        done = self.cli("daemon", "status", "--json")
        if done.returncode != 0:
            return None
        return int(json.loads(done.stdout)["pid"])

    def stop(self) -> list[int]:
        """End the CLIs `start_cli` started, stop the daemon if one runs, then kill whatever is left of this world:
        the pids that had to be killed."""
        self.spawned.end_all()
        self.cli("daemon", "stop")
        deadline = time.monotonic() + 15
        while (left := self.processes()) and time.monotonic() < deadline:
            time.sleep(0.05)  # workers close their sessions and end; bounded wait on real process exits
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left

    def processes(self) -> list[int]:
        """Live processes that belong to this world: its path in their command line or working directory."""
        marker = str(self.root)
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
                cwd = os.readlink(f"/proc/{entry}/cwd")
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z" and (marker in cmdline or cwd.startswith(marker)):
                found.append(int(entry))
        return found


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
    env["EUKHE_KERNEL_PYTHON"] = sys.executable  # cells run on the suite's interpreter: nothing to install
    world.env = env
    return world


@contextlib.contextmanager
def private_world(prefix: str = "ek") -> Iterator[DaemonEnv]:
    """A private world (short path: socket paths must stay under 108 bytes); its daemon is stopped at the end."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    world = make_env(root)
    try:
        yield world
    finally:
        left = world.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not left, f"processes outlived the daemon stop: {left}"


@pytest.fixture
def world() -> Iterator[DaemonEnv]:
    """A private world; its daemon is stopped at the end."""
    with private_world() as world:
        yield world


def run_all(cmds: Sequence[Sequence[str]], world: DaemonEnv) -> list[subprocess.CompletedProcess[str]]:
    return [world.cli(*cmd) for cmd in cmds]
