"""An agent's ordinary day works in a default session (the default sandbox policy: `workspace_write`, the network
on) through MCP, with no workaround, and every refusal on the way says it was the sandbox and what to do.

One scenario, through `eukhe mcp` over stdio under the real MCP client, text results as the model reads them (the
server sends no structured content), in a fresh home under /tmp and one under /var/tmp whose `~/.gitconfig` holds
the user's identity, and nothing else (no `~/.cache`: the sandbox makes it). eukhe starts with the environment the
suite runs in, `python3 -m uv run`'s (the README's way): its own `VIRTUAL_ENV` and uv's parent interpreter are there,
and no job may install into them. The agent's calls:
1. a package: written with the `write` tool (a pyproject, built by uv's own backend), installed editable into a
   `.venv` with `uv venv` and `uv pip install -e .`, imported by `.venv/bin/python` in another call;
2. git with a remote: `git init`, a commit with the user's identity, `git config user.email`, a bare repository in
   the working directory as the remote, `git remote add`, `git branch -m`, `git push -u`: each `[exit 0]`; a
   `git config core.fsmonitor` that would run a program is undone and the answer names it, and the user's
   `git status` on the host after the session runs nothing;
3. a dev server a second call reaches: left running by the shell, it goes on as a job the answer names; another call
   lists the working directory through it; `jobs_cancel` ends it and no process of it is left;
4. a plot in a cell: matplotlib installed into the workspace `.venv` by a confined `uv pip install` from the package
   index (the network is on), imported by the cell from there (`workspace_venv`), its figure an `image` block of the
   result. The kernel runs on a bare venv of the test's (as the installed kernel venv, it has no matplotlib), so the
   import can come from nowhere else. Without the package index (probed outside eukhe first), only this part skips;
5. a refusal: `touch ~/x` fails, and the answer's last line says the sandbox refused, by which rule, and the ways on.

Real bubblewrap, real git, a real daemon; waits poll real events (a port accepting), bounded by deadlines only a hang
reaches.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mcp_types as types
import pytest

from eukhe.calls.texts import left_line
from eukhe.core.pictures import PNG_SIGNATURE
from tests.real.conftest import DaemonEnv
from tests.real.test_cell_packages import BASE_PYTHON, LIB, uv
from tests.real.test_left_running_jobs import DEADLINE_S, accepting, free_port
from tests.real.test_mcp_server import Server, eventually, mcp_server, text_of
from tests.real.test_mcp_server import run as run_mcp
from tests.real.test_sandbox_jobs import tagged
from tests.real.tools import missing_reason

pytestmark = [pytest.mark.real, pytest.mark.skipif(bool(missing_reason("bwrap", "git")), reason="bwrap, git")]

HOME_BASES = ("/tmp", "/var/tmp")
NAME, EMAIL = "Day User", "day@eukhe.invalid"
INDEX = "https://pypi.org/simple/"
"""The package index a confined `uv pip install matplotlib` reaches (the network is on)."""
BUDGET = 300_000
"""A call's budget: generous, so that each answers at its job's real end (a download may be slow)."""

PYPROJECT = """\
[project]
name = "daypkg"
version = "0.1.0"

[build-system]
requires = ["uv_build"]
build-backend = "uv_build"
"""
GITIGNORE = ".venv/\nremote.git/\n*.log\n"
PLOT = """\
import daypkg, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
print(matplotlib.__file__, daypkg.VALUE)
plt.show()
"""


@dataclass
class Day:
    """A fresh home under `base` (the user's git identity in `~/.gitconfig`, nothing else: no `~/.cache` either), a
    working directory beside it, and the uv the agent runs."""

    world: DaemonEnv
    base: Path
    home: Path
    cwd: Path
    uv: str

    def users_git(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The user's git on the host, after the session: the user's home, no override of its config."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env["HOME"] = str(self.home)
        return subprocess.run(
            ["git", *args], cwd=self.cwd, env=env, capture_output=True, text=True, timeout=60, check=False
        )


@pytest.fixture(params=HOME_BASES)
def day(world: DaemonEnv, request: pytest.FixtureRequest) -> Iterator[Day]:
    base = Path(tempfile.mkdtemp(prefix="eukhe-day-", dir=request.param))
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[user]\n\tname = {NAME}\n\temail = {EMAIL}\n")
    cwd = base / "project"
    cwd.mkdir()
    world.env["HOME"] = str(home)
    for name in [name for name in world.env if name.startswith("GIT_")]:
        del world.env[name]  # git in the jobs reads the user's files, as on a user's machine
    found = uv()
    kernel = world.root / "kernel-venv"  # the kernel's own venv: no matplotlib, as the installed one has none
    subprocess.run([found, "venv", "-q", "--python", BASE_PYTHON, str(kernel)], check=True, capture_output=True)
    world.env["EUKHE_KERNEL_PYTHON"] = str(kernel / "bin" / "python")
    try:
        yield Day(world, base, home, cwd, found)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def index_reachable() -> bool:
    """Whether the package index answers (outside eukhe, through the proxy the environment names, a short
    timeout)."""
    with contextlib.suppress(OSError), urllib.request.urlopen(urllib.request.Request(INDEX, method="HEAD"), timeout=10):
        return True
    return False


async def bash(server: Server, command: str) -> str:
    return await server.text("bash", {"command": command, "budget_ms": BUDGET})


async def succeeds(server: Server, command: str) -> str:
    """Run `command`: it must answer `[exit 0]`, with nothing after it (no notice, no refusal)."""
    text = await bash(server, command)
    assert text.endswith("[exit 0]"), f"{command}\n{text}"
    return text


def test_an_agents_ordinary_day_works_in_a_default_session_through_mcp(day: Day) -> None:
    tag, port = uuid.uuid4().hex, free_port()
    cwd, uv_ = day.cwd, day.uv
    index = index_reachable()  # probed outside eukhe, before the day
    skipped: list[str] = []

    async def scenario() -> None:
        async with mcp_server(day.world, "--cwd", str(cwd), structured=False) as server:
            # 1. A package.
            for path, content in (
                ("pyproject.toml", PYPROJECT),
                ("src/daypkg/__init__.py", "VALUE = 42\n"),
                (".gitignore", GITIGNORE),
            ):
                written = await server.text("write", {"path": path, "content": content})
                assert written == f"created {cwd / path} ({len(content)} bytes)", written
            await succeeds(server, f"{uv_} venv --python {BASE_PYTHON} .venv && {uv_} pip install -e .")
            imported = await succeeds(server, ".venv/bin/python -c 'import daypkg; print(daypkg.VALUE)'")
            assert imported == "42\n[exit 0]", imported

            # 2. git with a remote.
            await succeeds(server, "git init -q")
            await succeeds(server, "git add -A && git commit -qm 'a package'")
            author = await succeeds(server, "git log -1 --format='%an <%ae>'")
            assert author == f"{NAME} <{EMAIL}>\n[exit 0]", author  # the user's identity, from ~/.gitconfig
            await succeeds(server, "git config user.email work@eukhe.invalid")
            await succeeds(server, "git init -q --bare remote.git")
            await succeeds(server, "git remote add origin ./remote.git")
            await succeeds(server, "git branch -m main")
            pushed = await succeeds(server, "git push -u origin main")
            assert "main -> main" in pushed and "set up to track" in pushed, pushed
            planted = await bash(server, 'git config core.fsmonitor "touch PWNED"')
            assert planted == (
                f"(no output)\n[exit 0]\n[eukhe removed core.fsmonitor from {cwd / '.git' / 'config'}, which a "
                "confined command wrote: core.fsmonitor names a program or a file git reads, which your next git "
                "command outside eukhe would follow (set it yourself, outside eukhe, if you want it)]"
            ), planted

            # 3. A dev server reached from another call.
            started = await bash(
                server,
                f"export SANDBOX_TEST_TAG={tag}; python3 -m http.server {port} --bind 127.0.0.1 >srv.log 2>&1 & "
                "echo started",
            )
            found = re.fullmatch(
                r"started\n\[exit 0\]\n\[processes it left running go on as job (job-[0-9a-f]+): .*\]", started
            )
            assert found, started
            left = found.group(1)
            assert started == "started\n[exit 0]" + left_line(left)
            await eventually(lambda: accepting(port), f"the server on port {port}", DEADLINE_S)
            listing = await succeeds(
                server,
                f"python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/')"
                '.read().decode())"',
            )
            assert "srv.log" in listing and "pyproject.toml" in listing, listing
            cancelled = await server.text("jobs_cancel", {"job": left})
            assert "killed" in cancelled, cancelled
            assert tagged(tag) == []
            assert not accepting(port)

            # 4. A plot in a cell, matplotlib from the workspace .venv.
            if not index:
                skipped.append(f"the package index {INDEX} does not answer: no matplotlib to install for the plot")
            else:
                await succeeds(server, f"{uv_} pip install --python .venv matplotlib")
                result = await server.call("ipython", {"code": PLOT, "budget_ms": BUDGET})
                assert not result.is_error, result.content
                text = text_of(result)
                site = cwd / ".venv" / "lib" / LIB / "site-packages"
                assert f"{site / 'matplotlib' / '__init__.py'} 42\n" in text, text
                assert f"[cells import from {site} too (workspace_venv)" in text, text
                assert re.search(r"\[image 1: image/png \d+x\d+, \d+ bytes, shown; saved at ", text), text
                (image,) = [block for block in result.content if block.type == "image"]
                assert isinstance(image, types.ImageContent) and image.mime_type == "image/png", image
                assert base64.b64decode(image.data).startswith(PNG_SIGNATURE)

            # 5. A refusal on the way.
            refused = await bash(server, "touch ~/x")
            said, exit_line, last = refused.splitlines()
            assert said.startswith("touch: cannot touch ") and said.endswith(": Read-only file system"), refused
            assert str(day.home / "x") in said and exit_line == "[exit 1]", refused
            assert last == (
                f"[sandbox refused (outside_writable_roots): {day.home / 'x'} is outside the writable roots, so it is "
                "read-only here; write under the working directory or /tmp instead; to allow it, the user adds it to "
                "sandbox.writable_roots, or starts a session with --sandbox off]"
            ), refused

    run_mcp(scenario)
    assert tagged(tag) == []
    assert not (day.home / "x").exists()
    assert day.users_git("config", "--get", "core.fsmonitor").stdout == ""
    status = day.users_git("status", "--short")
    assert (status.returncode, status.stdout) == (0, ""), status  # all committed; nothing of eukhe's shows
    assert list(day.base.rglob("PWNED")) == [], "the user's git status ran what the job planted"
    remote = day.users_git("--git-dir", "remote.git", "log", "--format=%s", "main")
    assert remote.stdout == "a package\n", remote
    if skipped:
        pytest.skip(" ".join(skipped))
