"""Python skills in the kernel (spec "The kernel environment" 2, "Where the sandbox runs"): a user's skill whose
directory holds a pyproject.toml is installed into the real kernel venv with uv `--offline` (at `eukhe kernel
install`, with the network taken away, and again at a kernel start when it changed), imports in a cell, is listed by
`rlm.skills()`; a project's Python skill is never built on the host (its build backend is code a confined job could
have written) but imported from its source, and a venv whose record names one is rebuilt; on a user's Python and in
a bwrap-wrapped kernel a skill's directory goes in front of PYTHONPATH (by its sandbox path), and one no mount holds
is left out with a diagnostic; a skill that fails to install is named with uv's message and the kernel runs all the
same."""

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
from eukhe.kernel.bootstrap import check_state
from eukhe.kernel.bootstrap.skills import SKILLS_RECORD, SkillInstall, SkillsRecord, read_skills_record
from eukhe.kernel.bootstrap.venv import kernel_paths, write_record
from tests.real.conftest import DaemonEnv
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
from tests.real.tools import need_tools
from tests.skills_support import write_planted_skill, write_python_skill, write_skill

pytestmark = pytest.mark.real


NEEDS_AN_INDEX = (
    '[project]\nname = "needs-index"\nversion = "0.1.0"\n\n[build-system]\n'
    'requires = ["surely-not-cached-backend-xyz"]\nbuild-backend = "surely_not_cached"\n'
)
"""A pyproject whose build backend no cache holds: offline, uv cannot build it."""


def users_skill(user: Path, greeting: str = "hi") -> Path:
    """The user's Python skill `hello-skill` (in `<home>/.agents/skills`), its package `hello_skill`."""
    return write_python_skill(user / ".agents" / "skills", "hello-skill", "hello_skill", f"GREETING = {greeting!r}\n")


def venv_imports(package: str) -> subprocess.CompletedProcess[str]:
    """The kernel venv's Python, isolated (no PYTHONPATH), importing `package` and printing where from."""
    return subprocess.run(
        [str(kernel_paths().python), "-I", "-c", f"import {package}; print({package}.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@needs_unshare
@pytest.mark.usefixtures("home")
def test_kernel_install_installs_the_users_python_skills_with_no_network_and_builds_no_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert install()  # the venv, built once (the shared uv cache holds the wheels)
    user = tmp_path / "user"
    monkeypatch.setenv("HOME", str(user))
    users_skill(user)
    agent = Path(os.environ["EUKHE_CODING_AGENT_DIR"])
    write_skill(agent / "skills", "needs-index", files={"pyproject.toml": NEEDS_AN_INDEX})
    project = tmp_path / "project"
    marker = tmp_path / "the-backend-ran-on-the-host"
    write_planted_skill(project / ".claude" / "skills", "planted", "planted_skill", marker)
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
    assert not marker.exists()  # the project's build backend never ran
    assert venv_imports("planted_skill").returncode != 0  # nor is its package in the shared venv
    probe = venv_imports("hello_skill")
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).is_relative_to(kernel_paths().venv)  # the user's: installed, not on a path
    record = read_skills_record(kernel_paths())
    assert record is not None
    assert [(s.name, s.error is None) for s in record.skills] == [("hello-skill", True), ("needs-index", False)]


@pytest.mark.usefixtures("home")
def test_a_changed_users_skill_is_reinstalled_at_the_next_kernel_start_and_a_projects_imports_from_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert install()
    user = tmp_path / "user"
    monkeypatch.setenv("HOME", str(user))
    skill = users_skill(user)
    broken = write_skill(
        user / ".agents" / "skills",
        "broken-pkg",
        files={"pyproject.toml": "[project\nthis is not toml\n", "broken_pkg/__init__.py": "VALUE = 'from source'\n"},
    )
    project = tmp_path / "project"
    marker = tmp_path / "the-backend-ran-on-the-host"
    planted = write_planted_skill(project / ".agents" / "skills", "planted", "planted_skill", marker)

    async def start_and_read() -> tuple[Any, Any, list[str]]:
        session = await Session.create(project, root=tmp_path / "sessions")
        try:
            greeting = await cell(session, "import hello_skill; hello_skill.GREETING")
            # A skill that did not install is imported from its source; a project's always is.
            assert await cell(session, "import broken_pkg; broken_pkg.VALUE") == "from source"
            assert await cell(session, "import planted_skill; planted_skill.__file__") == str(
                planted / "planted_skill" / "__init__.py"
            )
            listed = await cell(session, "[(s.name, s.scope, s.python, s.import_path) for s in rlm.skills()]")
            notes = list(session.kernel.diagnostics)
        finally:
            await session.close()
        return greeting, listed, notes

    greeting, listed, notes = asyncio.run(start_and_read())
    assert greeting == "hi"
    named = [line for line in notes if "the Python skill broken-pkg" in line and "did not install" in line]
    assert named and "pyproject.toml" in named[0]  # the kernel's start names it, with uv's message
    # On the venv: an installed skill has no path; one that did not install and a project's are on the path.
    assert listed == [
        ("broken-pkg", "user", True, str(broken)),
        ("hello-skill", "user", True, None),
        ("planted", "project", True, str(planted)),
    ]
    assert not marker.exists()
    record = read_skills_record(kernel_paths())
    assert record is not None
    errors = {s.name: s.error for s in record.skills}
    assert set(errors) == {"broken-pkg", "hello-skill"}  # the project's is not in the shared venv
    assert errors["hello-skill"] is None
    assert errors["broken-pkg"] and "pyproject.toml" in errors["broken-pkg"]  # uv's own message
    assert str(broken) in next(s.dir for s in record.skills if s.name == "broken-pkg")
    first = record.fingerprint

    (skill / "hello_skill" / "__init__.py").write_text("GREETING = 'changed'\n")
    (planted / "planted_skill" / "__init__.py").write_text("GREETING = 'changed too'\n")
    greeting, _, _ = asyncio.run(start_and_read())
    assert greeting == "changed"  # reinstalled at this kernel start
    again = read_skills_record(kernel_paths())
    assert again is not None and again.fingerprint != first
    assert (kernel_paths().venv / SKILLS_RECORD).is_file()
    assert not marker.exists()


@pytest.mark.usefixtures("home")
def test_a_rebuilt_venv_gets_the_users_python_skills_at_the_kernel_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert install()
    user = tmp_path / "user"
    monkeypatch.setenv("HOME", str(user))
    users_skill(user, greeting="rebuilt")
    project = tmp_path / "project"
    project.mkdir()
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


@pytest.mark.usefixtures("home")
def test_a_venv_whose_record_names_a_projects_skill_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert install()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    project = tmp_path / "project"
    elsewhere = write_python_skill(project / ".agents" / "skills", "old-skill", "old_skill", "X = 1\n")
    paths = kernel_paths()
    # The record an eukhe that installed project skills too left: the venv may hold that project's package.
    write_record(
        paths.venv / SKILLS_RECORD,
        SkillsRecord(fingerprint="0", skills=[SkillInstall(name="old-skill", dir=str(elsewhere))]),
    )
    assert check_state().state == "stale"
    before = paths.venv.stat().st_ino

    async def scenario() -> None:
        session = await Session.create(project, root=tmp_path / "sessions")
        try:
            assert await cell(session, "import old_skill; old_skill.__file__") == str(
                elsewhere / "old_skill" / "__init__.py"
            )
        finally:
            await session.close()

    run(scenario())
    assert paths.venv.stat().st_ino != before  # rebuilt: nothing of a project's is left in it
    record = read_skills_record(paths)
    assert record is not None and record.skills == []
    assert check_state().state == "ready"


def test_a_planted_project_skill_never_builds_on_the_host_and_imports_from_source_after_a_kernel_restart(
    world: DaemonEnv,
    uv_cache: Path,  # noqa: F811  (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A confined session's job can write `.claude/skills/<name>/` with a pyproject whose in-tree build backend is
    its own code: no kernel start builds it on the host, and a cell imports its package from source."""
    need_tools("bwrap")
    for name, value in (("EUKHE_CODING_AGENT_DIR", str(world.agent_dir)), ("UV_CACHE_DIR", str(uv_cache))):
        monkeypatch.setenv(name, value)
        world.env[name] = value
    for name in ("EUKHE_KERNEL_PYTHON", "EUKHE_KERNEL_VENV"):
        monkeypatch.delenv(name, raising=False)
        world.env.pop(name, None)
    assert install()  # the shared kernel venv, in this world's agent dir
    Path(world.env["HOME"]).mkdir()
    project = world.root / "project"
    project.mkdir()
    marker = world.root / "the-backend-ran-on-the-host"
    session = world.json("session", "create", "--cwd", str(project))["id"]
    assert world.json("session", "show", session)["sandbox"]["mode"] == "workspace_write"
    assert world.json("ipython", "--session", session, "-c", "1 + 1")["result"] == "2"  # a kernel, no skill yet

    # What a job of the session can write in its working directory (here written from outside, the same bytes).
    planted = write_planted_skill(project / ".claude" / "skills", "planted", "planted_skill", marker)
    died = world.cli("ipython", "--session", session, "-c", "import os; os._exit(3)")
    assert "KernelDiedError" in died.stdout + died.stderr, died  # the next cell starts a kernel again

    found = world.json("ipython", "--session", session, "-c", "import planted_skill; planted_skill.GREETING")
    assert found["result"] == "'planted'", found
    rows = world.json("ipython", "--session", session, "-c", "[(s.name, s.import_path) for s in rlm.skills()]")
    assert rows["result"] == repr([("planted", str(planted))]), rows
    assert not marker.exists()  # the backend never ran on the host
    assert venv_imports("planted_skill").returncode != 0  # and the shared venv does not hold the package
    record = read_skills_record(kernel_paths())
    assert record is None or record.skills == []


def test_a_python_skill_imports_in_a_local_kernel_on_a_users_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    skill = write_python_skill(project / ".agents" / "skills", "hello-skill", "hello_skill", "GREETING = 'hi'\n")
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
