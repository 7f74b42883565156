"""Every directory eukhe makes is 0700 at creation, on every path and under any umask (spec "Local access").

`eukhe kernel install` on a machine without uv on PATH makes the agent dir 0700 (a plain `mkdir(parents=True)` would
give 0755 under umask 022, 0777 under umask 000). The commands that build under the agent dir (venv, pip, uv) run
under umask 077, so what they make is private too. Each case runs the real command in a fresh agent dir and stops it
early (no index to download from), then checks every directory it left.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

DEAD_INDEX = "http://127.0.0.1:9/simple"
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)


def not_private(root: Path) -> list[str]:
    found = [root, *(Path(base) / name for base, names, _ in os.walk(root) for name in names)]
    return [
        f"{oct(stat.S_IMODE(path.lstat().st_mode))} {path}"
        for path in found
        if not path.is_symlink() and stat.S_IMODE(path.lstat().st_mode) != 0o700
    ]


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
@pytest.mark.parametrize("uv_on_path", [True, False], ids=["with-uv", "without-uv"])
def test_the_kernel_install_makes_only_private_dirs(tmp_path: Path, umask: int, uv_on_path: bool) -> None:
    agent = tmp_path / "deep" / "agent"  # missing parents too
    env = {key: value for key, value in os.environ.items() if not key.startswith(("EUKHE_", "UV", "VIRTUAL_ENV"))}
    env.update(EUKHE_CODING_AGENT_DIR=str(agent), PIP_INDEX_URL=DEAD_INDEX, UV_INDEX_URL=DEAD_INDEX, UV_OFFLINE="1")
    if not uv_on_path:
        env["PATH"] = "/usr/bin:/bin"  # no uv there: the install installs its own under the agent dir (and fails)
    done = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "kernel", "install", "--python", BASE_PYTHON, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        umask=umask,
        check=False,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)  # it stopped where a download was due
    assert ("uv_install" if not uv_on_path else "lock_install") in done.stdout
    assert agent.is_dir()
    assert not_private(agent) == []
    assert not_private(tmp_path / "deep") == []
    if not uv_on_path:
        assert (agent / "tools" / "uv" / "bin").is_dir()  # the venv it began for uv is there, and private


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_a_session_and_a_run_make_only_private_dirs(tmp_path: Path, umask: int) -> None:
    agent = tmp_path / "deep" / "agent"
    env = {key: value for key, value in os.environ.items() if not key.startswith("EUKHE_")}
    env["EUKHE_CODING_AGENT_DIR"] = str(agent)
    code = (
        "import asyncio, sys\n"
        "from eukhe.api import Session\n"
        "async def main():\n"
        "    session = await Session.create(sys.argv[1])\n"
        "    await session.execute_bash_and_wait('head -c 100000 /dev/zero', budget_ms=10_000)\n"
        "    await session.close()\n"
        "asyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, umask=umask, check=True, timeout=60)
    subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "run", "--", "head", "-c", "100000", "/dev/zero"],
        env=env,
        umask=umask,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert (agent / "artifacts").is_dir()
    assert not_private(tmp_path / "deep") == []
