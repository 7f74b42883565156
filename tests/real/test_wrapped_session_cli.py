"""A newcomer's wrapped kernel, end to end through the CLI and the daemon: `kernel_transport`
in the user's settings file, then `eukhe session create`, `eukhe ipython`, `eukhe session show`, `eukhe fs read`:
cells run under bubblewrap in the sandbox path, `rlm.fs.read` answers across the path map, a path outside every
mount is refused `outside`, and closing the session leaves no process of the kernel."""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.real.conftest import DaemonEnv
from tests.real.sandboxes import SANDBOX_PYTHON, need_root, wrapped_kernels
from tests.real.tools import need_tools

pytestmark = pytest.mark.real


def cell(world: DaemonEnv, session: str, code: str) -> Any:
    answer = world.json("ipython", "--session", session, "--budget-ms", "60000", "-c", code, timeout=120)
    assert answer["status"] == "settled", answer
    assert answer["error"] is None, answer["error"]
    return ast.literal_eval(answer["result"])


def test_a_bwrap_kernel_set_in_the_user_settings_serves_cells_and_files_through_the_cli(
    world: DaemonEnv, tmp_path: Path
) -> None:
    need_root("bubblewrap")
    need_tools("bwrap")
    host = tmp_path / "host"
    (host / "sub").mkdir(parents=True)
    (host / "sub" / "b.txt").write_text("beta\n")
    prefix = ["bwrap", "--ro-bind", "/", "/", "--bind", str(host), "/work", "--dev", "/dev", "--proc", "/proc"]
    prefix += ["--tmpfs", "/tmp", "--clearenv", "--die-with-parent"]
    setting = {"argv_prefix": prefix, "python": SANDBOX_PYTHON, "path_map": [{"sandbox": "/work", "host": str(host)}]}
    world.agent_dir.mkdir(parents=True, exist_ok=True)
    (world.agent_dir / "settings.json").write_text(json.dumps({"kernel_transport": setting}))

    session = world.json("session", "create", "--cwd", str(host))["id"]
    try:
        shown = world.json("session", "show", session)
        assert shown["kernel_transport"]["argv_prefix"][0] == "bwrap", shown
        assert cell(world, session, "import os\nos.getcwd()") == "/work"
        read = cell(world, session, "a = rlm.fs.read('sub/b.txt')\n(a.absolute, a.text)")
        assert read == ("/work/sub/b.txt", "beta\n")
        refuse = "try:\n    rlm.fs.read('/etc/passwd')\nexcept rlm.FsError as e:\n    r = e.reason\nr"
        assert cell(world, session, refuse) == "outside"
        # The CLI's own fs tools are the host's side: host paths (relative ones from the shell's directory).
        assert world.json("fs", "read", "--session", session, str(host / "sub" / "b.txt"))["output"]["text"] == "beta\n"
        assert wrapped_kernels()
    finally:
        world.json("session", "close", session, "--force")
    deadline = time.monotonic() + 20
    while wrapped_kernels() and time.monotonic() < deadline:
        time.sleep(0.05)  # bounded wait for the real kernel's end after its stdin closed
    assert wrapped_kernels() == []
