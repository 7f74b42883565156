"""The Local transport's launch (S3 "Where the sandbox runs" 1, 7): one place names the argv and environment."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from eukhe.kernel.launch import OWNER_PID_VARIABLE, installed_kernel_launch, kernel_launch


def test_the_local_kernel_runs_the_stub_with_the_hosts_environment_and_owner_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's environment but what uv set to run eukhe itself (`uv run`: its own venv, uv's parent Python)."""
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    monkeypatch.setenv("UV_INTERNAL__PARENT_INTERPRETER", sys.executable)
    launch = kernel_launch()
    assert launch.argv == (sys.executable, "-m", "eukhe_kernel")
    assert launch.env[OWNER_PID_VARIABLE] == str(os.getpid())
    launchers = ("VIRTUAL_ENV", "UV_INTERNAL__PARENT_INTERPRETER")
    assert not any(key in launch.env for key in launchers)
    for key, value in os.environ.items():
        if key not in (OWNER_PID_VARIABLE, "PYTHONPATH", *launchers):
            assert launch.env[key] == value
    first = Path(launch.env["PYTHONPATH"].split(os.pathsep)[0])
    assert (first / "eukhe_kernel" / "__main__.py").is_file()


def test_a_user_kernel_python_is_launched_through_the_kernel_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`EUKHE_KERNEL_PYTHON` names the interpreter; the installed launch runs the stub on it (nothing installed)."""
    monkeypatch.setenv("EUKHE_KERNEL_PYTHON", sys.executable)
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(tmp_path / "agent"))
    launch = asyncio.run(installed_kernel_launch())
    assert Path(launch.argv[0]).resolve() == Path(sys.executable).resolve()
    assert launch.argv[1:] == ("-m", "eukhe_kernel")
    assert launch.env["EUKHE_KERNEL_OWNER_PID"] == str(os.getpid())
