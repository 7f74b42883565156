"""A whole CLI call against a running daemon imports nothing heavy (bench/cli_roundtrip.py's target): the modules a
fresh `eukhe bash --json` process imports, read from `python -X importtime`, while the call still answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv
from tests.unit.test_cli_imports import heavy

pytestmark = pytest.mark.real

MAIN = "import sys; from eukhe.cli.main import main; sys.exit(main())"


def imported_modules(stderr: str) -> list[str]:
    """The module names of `-X importtime` lines."""
    return [
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and not line.rstrip().endswith("| imported package")
    ]


def traced_cli(world: DaemonEnv, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run `eukhe ARGS` under -X importtime: the process and the modules it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", MAIN, *args],
        env=world.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, imported_modules(done.stderr)


def test_a_warm_bash_call_imports_nothing_heavy(world: DaemonEnv, tmp_path: Path) -> None:
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    done, modules = traced_cli(world, "bash", "--session", session, "--json", "--", "echo hi")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"]["text"] == "hi\n"
    assert "eukhe.daemon.client" in modules
    assert heavy(modules) == [], f"a warm `eukhe bash` imports {heavy(modules)}"

    done, modules = traced_cli(world, "daemon", "status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["running"] is True
    assert heavy(modules) == [], f"`eukhe daemon status` imports {heavy(modules)}"
