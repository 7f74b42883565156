"""Python skills in the kernel (spec "The kernel environment" 2, "Where the sandbox runs"): a skill whose directory
holds a pyproject.toml is installed into the real kernel venv with uv `--offline` (at `eukhe kernel install`, with
the network taken away, and again at a kernel start when it changed), imports in a cell, is listed by
`rlm.skills()`; on a user's Python and in a bwrap-wrapped kernel its directory goes in front of PYTHONPATH (by its
sandbox path), and one no mount holds is left out with a diagnostic; a skill that fails to install is named with
uv's message and the kernel runs all the same."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eukhe.api import Session, Settled
from eukhe.kernel.bootstrap.skills import SKILLS_RECORD, read_skills_record
from eukhe.kernel.bootstrap.venv import kernel_paths
from tests.real.kernel_support import run
from tests.real.sandboxes import SANDBOX_PYTHON, wrapper
from tests.real.test_kernel_install_real import (  # noqa: F401  (fixtures)
    BASE_PYTHON,
    REPO,
    home,
    install,
    needs_unshare,
    uv_cache,
)
from tests.real.test_kernel_transport import cell
from tests.skills_support import write_python_skill, write_skill

pytestmark = pytest.mark.real


NEEDS_AN_INDEX = (
    '[project]\nname = "needs-index"\nversion = "0.1.0"\n\n[build-system]\n'
    'requires = ["surely-not-cached-backend-xyz"]\nbuild-backend = "surely_not_cached"\n'
)
"""A pyproject whose build backend no cache holds: offline, uv cannot build it."""


def project_with_a_skill(tmp_path: Path, greeting: str = "hi") -> tuple[Path, Path]:
    project = tmp_path / "project"
    skill = write_python_skill(
        project / ".agents" / "skills", "hello-skill", "hello_skill", f"GREETING = {greeting!r}\n"
    )
    return project, skill


@needs_unshare
@pytest.mark.usefixtures("home")
def test_kernel_install_installs_a_python_skill_with_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert install()  # the venv, built once (the shared uv cache holds the wheels)
    project, _ = project_with_a_skill(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    write_skill(project / ".agents" / "skills", "needs-index", files={"pyproject.toml": NEEDS_AN_INDEX})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "eukhe.cli.main", "kernel", "install", "--python", BASE_PYTHON],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # a skill that fails stops nothing
    [failed] = [line for line in done.stderr.splitlines() if "did not install" in line]
    assert "the Python skill needs-index" in failed and "network was disabled" in failed  # named, with uv's message
    python = kernel_paths().python
    probe = subprocess.run(
        [str(python), "-I", "-c", "import hello_skill; print(hello_skill.GREETING, hello_skill.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    greeting, where = probe.stdout.split()
    assert greeting == "hi" and Path(where).is_relative_to(kernel_paths().venv)  # installed, not on a path
    record = read_skills_record(kernel_paths())
    assert record is not None
    assert [(s.name, s.error is None) for s in record.skills] == [("hello-skill", True), ("needs-index", False)]


@pytest.mark.usefixtures("home")
def test_a_changed_skill_is_reinstalled_at_the_next_kernel_start_and_a_broken_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert install()
    project, skill = project_with_a_skill(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    broken = write_skill(
        project / ".agents" / "skills",
        "broken-pkg",
        files={"pyproject.toml": "[project\nthis is not toml\n", "broken_pkg/__init__.py": "VALUE = 'from source'\n"},
    )

    async def start_and_read() -> tuple[Any, Any, list[str]]:
        session = await Session.create(project, root=tmp_path / "sessions")
        try:
            greeting = await cell(session, "import hello_skill; hello_skill.GREETING")
            # A skill that did not install is imported from its source.
            assert await cell(session, "import broken_pkg; broken_pkg.VALUE") == "from source"
            listed = await cell(session, "[(s.name, s.python, s.import_path) for s in rlm.skills()]")
            notes = list(session.kernel.diagnostics)
        finally:
            await session.close()
        return greeting, listed, notes

    greeting, listed, notes = asyncio.run(start_and_read())
    assert greeting == "hi"
    named = [line for line in notes if "the Python skill broken-pkg" in line and "did not install" in line]
    assert named and "pyproject.toml" in named[0]  # the kernel's start names it, with uv's message
    # On the venv: an installed skill has no path; the one that did not install is imported from its directory.
    assert listed == [("broken-pkg", True, str(broken)), ("hello-skill", True, None)]
    record = read_skills_record(kernel_paths())
    assert record is not None
    errors = {s.name: s.error for s in record.skills}
    assert errors["hello-skill"] is None
    assert errors["broken-pkg"] and "pyproject.toml" in errors["broken-pkg"]  # uv's own message
    assert str(broken) in next(s.dir for s in record.skills if s.name == "broken-pkg")
    first = record.fingerprint

    (skill / "hello_skill" / "__init__.py").write_text("GREETING = 'changed'\n")
    greeting, _, _ = asyncio.run(start_and_read())
    assert greeting == "changed"  # reinstalled at this kernel start
    again = read_skills_record(kernel_paths())
    assert again is not None and again.fingerprint != first
    assert (kernel_paths().venv / SKILLS_RECORD).is_file()


@pytest.mark.usefixtures("home")
def test_a_rebuilt_venv_gets_the_python_skills_at_the_kernel_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert install()
    project, _ = project_with_a_skill(tmp_path, greeting="rebuilt")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    paths = kernel_paths()
    stamp = json.loads(paths.stamp.read_text())
    stamp["build"] = "0" * 64  # the venv of the build before an update: the kernel start rebuilds it
    paths.stamp.write_text(json.dumps(stamp))
    before = paths.venv.stat().st_ino

    async def scenario() -> None:
        session = await Session.create(project, root=tmp_path / "sessions")
        try:
            assert await cell(session, "import hello_skill; hello_skill.GREETING") == "rebuilt"
        finally:
            await session.close()

    run(scenario())
    assert paths.venv.stat().st_ino != before  # a new venv, and the skill in it
    record = read_skills_record(paths)
    assert record is not None and [(s.name, s.error) for s in record.skills] == [("hello-skill", None)]


def test_a_python_skill_imports_in_a_local_kernel_on_a_users_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, skill = project_with_a_skill(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("EUKHE_KERNEL_PYTHON", sys.executable)  # a user's Python: eukhe installs nothing there
    write_skill(tmp_path / "agent" / "skills", "plain-user-skill")

    async def scenario() -> None:
        session = await Session.create(project, root=tmp_path / "sessions")
        try:
            assert await cell(session, "import hello_skill; hello_skill.__file__") == str(
                skill / "hello_skill" / "__init__.py"
            )
            rows = await cell(session, "[dict(s) for s in rlm.skills()]")
            assert [(r["name"], r["scope"], r["python"], r["import_path"]) for r in rows] == [
                ("hello-skill", "project", True, str(skill)),
                ("plain-user-skill", "user", False, None),
            ]
            assert await cell(session, "import os; os.environ['PYTHONPATH'].split(os.pathsep)[0]") == str(skill)
        finally:
            await session.close()

    run(scenario())


def test_a_python_skill_imports_in_a_bwrap_wrapped_kernel_by_its_sandbox_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    write_python_skill(host / ".agents" / "skills", "hello-skill", "hello_skill", "GREETING = 'wrapped'\n")
    agent = host / ".agent"
    agent.mkdir()
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(agent))
    user = tmp_path / "user"  # the user's skills: outside every mount
    monkeypatch.setenv("HOME", str(user))
    outside = write_python_skill(user / ".agents" / "skills", "far-skill", "far_skill", "X = 1\n")
    with wrapper("bwrap", tmp_path, host) as (setting, sandbox):
        setting.update(python=SANDBOX_PYTHON)
        (agent / "settings.json").write_text(json.dumps({"kernel_transport": setting}))

        async def scenario() -> None:
            session = await Session.create(host, root=tmp_path / "sessions")
            try:
                assert session.kernel_transport is not None
                found = await cell(session, "import hello_skill; (hello_skill.GREETING, hello_skill.__file__)")
                assert found == ("wrapped", f"{sandbox}/.agents/skills/hello-skill/hello_skill/__init__.py")
                rows = await cell(session, "[(s.name, s.path, s.import_path) for s in rlm.skills()]")
                assert rows == [
                    ("far-skill", None, None),
                    ("hello-skill", f"{sandbox}/.agents/skills/hello-skill", f"{sandbox}/.agents/skills/hello-skill"),
                ]
                assert await cell(session, "import os; os.environ['PYTHONPATH'].split(os.pathsep)[0]") == (
                    f"{sandbox}/.agents/skills/hello-skill"
                )
                refused = await session.ipython("import far_skill", budget_ms=60_000)
                assert isinstance(refused, Settled) and refused.error is not None
                left_out = [line for line in session.kernel.diagnostics if "far-skill" in line]
                assert left_out and "outside every mount" in left_out[0] and str(outside) in left_out[0]
            finally:
                await session.close()
            assert outside.is_dir()

        run(scenario())
