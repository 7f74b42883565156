"""Packages for cells (docs/kernel-install.md, "Packages for cells"): a confined session with the network off
installs a package into its working directory's `.venv` with `uv pip install` from a wheel the test wrote, and the
next cell imports it on the same kernel, its variables kept; a cell's ModuleNotFoundError ends with the hint (and no
other error does); a venv for another Python is not imported and the answer says why; `workspace_venv: "off"` in a
project's settings keeps cells on the kernel venv."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from eukhe.api import Session, SessionSettings, Settled
from eukhe.calls.texts import answer_text
from eukhe.kernel.bootstrap.uvtool import find_uv
from eukhe.records.sandbox import SandboxPolicy
from tests.real.conftest import DaemonEnv
from tests.real.tools import need_tools
from tests.real.wheel_support import write_wheel

pytestmark = pytest.mark.real

BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)
"""The interpreter the suite's kernel runs on (EUKHE_KERNEL_PYTHON is the suite's own venv of it)."""
BUDGET_MS = 120_000
"""Generous: a call's answer is awaited on the real end of its job, never on a guess of its length."""
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
LIB = f"python{PY}"


def uv() -> str:
    found = find_uv()
    if found is None:
        pytest.skip("needs uv")
    return str(found)


def settled(answer: object) -> Settled:
    assert isinstance(answer, Settled), answer
    return answer


def lines(answer: Settled) -> list[str]:
    return answer_text(answer).splitlines()


def test_a_cell_imports_what_a_confined_uv_pip_install_put_into_the_workspace_venv_and_keeps_its_variables(
    tmp_path: Path,
) -> None:
    need_tools("bwrap")
    cwd = tmp_path / "work"
    cwd.mkdir()
    write_wheel(cwd / "wheels", "cellpkg_demo", source="VALUE = 42\n")
    write_wheel(cwd / "wheels", "cellpkg_later", source="LATER = 'later'\n")
    (cwd / "src" / "editable_demo").mkdir(parents=True)
    (cwd / "src" / "editable_demo" / "__init__.py").write_text("WHERE = 'src'\n")
    install = f"{uv()} pip install --no-cache --offline --python .venv --find-links wheels"

    async def scenario() -> None:
        session = await Session.create(
            cwd,
            root=tmp_path / "sessions",
            sandbox=SandboxPolicy(network="off"),
            settings=SessionSettings(tool_blocking_budget_ms=BUDGET_MS),
        )
        try:
            before = settled(await session.ipython("x = 41\nimport cellpkg_demo", BUDGET_MS))
            assert before.error is not None and before.error.ename == "ModuleNotFoundError"
            venv = f"{cwd}/.venv"
            hint = (
                f"[pip install cellpkg_demo into {venv} (uv venv --python {PY} {venv} && uv pip install --python "
                f"{venv} cellpkg_demo) and run the cell again: cells import from it]"
            )
            assert before.error.traceback[-1] == hint + "\n"
            assert lines(before)[-2:] == [hint, "[cell raised ModuleNotFoundError]"]  # the answer's text ends so

            made = settled(
                await session.execute_bash_and_wait(
                    f"{uv()} venv --no-cache --python {BASE_PYTHON} .venv && {install} cellpkg_demo "
                    f"&& echo $PWD/src > .venv/lib/{LIB}/site-packages/editable_demo.pth",
                    BUDGET_MS,
                )
            )
            assert made.exit_code == 0, answer_text(made)

            after = settled(
                await session.ipython(
                    "import cellpkg_demo, editable_demo\n(cellpkg_demo.VALUE, x, editable_demo.WHERE)"
                )
            )
            assert after.outcome == "ok", answer_text(after)
            assert after.result == "(42, 41, 'src')"  # the same kernel: x is still there
            site = f"{venv}/lib/{LIB}/site-packages"
            assert after.notices == [
                f"cells import from {site} too (workspace_venv); what is installed there later imports at the next cell"
            ]
            assert f"[{after.notices[0]}]" in lines(after)

            later = settled(await session.execute_bash_and_wait(f"{install} cellpkg_later", BUDGET_MS))
            assert later.exit_code == 0, answer_text(later)
            again = settled(await session.ipython("import cellpkg_later\n(cellpkg_later.LATER, x)", BUDGET_MS))
            assert (again.outcome, again.result, again.notices) == ("ok", "('later', 41)", [])  # said once

            # Only a ModuleNotFoundError gets the line.
            for code, ename in (
                ("1 / 0", "ZeroDivisionError"),
                ("from cellpkg_demo import nothing_here", "ImportError"),
                ("raise ModuleNotFoundError('made up')", "ModuleNotFoundError"),
                ("raise ImportError(\"No module named 'cellpkg_nope'\")", "ImportError"),
            ):
                failed = settled(await session.ipython(code, BUDGET_MS))
                assert failed.error is not None and failed.error.ename == ename, answer_text(failed)
                assert not any(line.startswith("[pip install") for line in lines(failed)), answer_text(failed)
            private = settled(await session.ipython("import _surely_not.x", BUDGET_MS))
            assert "cells import from it" in lines(private)[-2]  # not the standard library's: it gets the line
            missing_stdlib = settled(await session.ipython("import json._nothing_xyz", BUDGET_MS))
            assert missing_stdlib.error is not None and missing_stdlib.error.ename == "ModuleNotFoundError"
            assert not any("pip install" in line for line in lines(missing_stdlib))
        finally:
            await session.close()

    asyncio.run(scenario())


def test_under_uv_run_a_jobs_uv_pip_install_goes_to_the_projects_venv_not_eukhes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python3 -m uv run eukhe ...` starts eukhe with `VIRTUAL_ENV` naming eukhe's own environment and uv's
    `UV_INTERNAL__PARENT_INTERPRETER` naming the Python that ran uv: jobs and cells get neither, so the agent's
    `uv pip install` goes to the project's `.venv` (not refused as a write into another Python); a `VIRTUAL_ENV` that
    names another environment is the user's, and stays."""
    need_tools("bwrap")
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    monkeypatch.setenv("UV_INTERNAL__PARENT_INTERPRETER", BASE_PYTHON)
    cwd = tmp_path / "work"
    write_wheel(cwd / "wheels", "launched_pkg")
    seen = 'echo "${VIRTUAL_ENV-unset} ${UV_INTERNAL__PARENT_INTERPRETER-unset}"'

    async def scenario() -> None:
        session = await Session.create(cwd, root=tmp_path / "sessions", sandbox=SandboxPolicy(network="off"))
        try:
            installed = settled(
                await session.execute_bash_and_wait(
                    f"{uv()} venv -q --no-cache --python {BASE_PYTHON} .venv && "
                    f"{uv()} pip install -q --no-cache --offline --find-links wheels launched_pkg && {seen}",
                    BUDGET_MS,
                )
            )
            assert (installed.exit_code, installed.output.text) == (0, "unset unset\n"), answer_text(installed)
            assert (cwd / ".venv" / "lib" / LIB / "site-packages" / "launched_pkg").is_dir()
            cell = settled(
                await session.ipython(
                    "import os\n[os.environ.get(n) for n in ('VIRTUAL_ENV', 'UV_INTERNAL__PARENT_INTERPRETER')]",
                    BUDGET_MS,
                )
            )
            assert cell.result == "[None, None]", answer_text(cell)
            monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "users-venv"))
            users = settled(await session.execute_bash_and_wait(seen, BUDGET_MS))
            assert users.output.text == f"{tmp_path / 'users-venv'} unset\n", answer_text(users)
        finally:
            await session.close()

    asyncio.run(scenario())


def test_a_venv_for_another_python_is_not_imported_and_the_answer_says_why(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    package = cwd / ".venv" / "lib" / "python3.99" / "site-packages" / "other_python_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 'wrong python'\n")

    async def scenario() -> None:
        session = await Session.create(cwd, root=tmp_path / "sessions", sandbox=SandboxPolicy(mode="off"))
        try:
            answer = settled(await session.ipython("import other_python_pkg", BUDGET_MS))
            assert answer.error is not None and answer.error.ename == "ModuleNotFoundError"
            venv = f"{cwd}/.venv"
            assert answer.notices == [
                f"cells do not import from {venv}: it is for Python 3.99, the kernel runs {PY} (workspace_venv)"
            ]
            hint = answer.error.traceback[-1]
            assert f"{venv} is for Python 3.99 while the kernel runs {PY}" in hint
            assert "eukhe kernel install --with other_python_pkg" in hint
        finally:
            await session.close()

    asyncio.run(scenario())


def test_workspace_venv_off_in_a_projects_settings_keeps_cells_on_the_kernel_venv(world: DaemonEnv) -> None:
    """Through the daemon and the CLI: the project's setting is recorded in the session, the `.venv` is not
    imported, and the hint says the user's way."""
    project = world.root / "project"
    site = project / ".venv" / "lib" / LIB / "site-packages" / "venv_only_pkg"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("VALUE = 1\n")
    (project / ".eukhe").mkdir()
    (project / ".eukhe" / "settings.json").write_text(json.dumps({"workspace_venv": "off"}))
    session = world.json("session", "create", "--cwd", str(project), "--sandbox", "off")["id"]
    shown = world.json("session", "show", session)
    assert shown["settings"]["workspace_venv"] == "off", shown
    answer = world.cli("ipython", "--session", session, "-c", "import venv_only_pkg")
    assert answer.returncode != 0
    assert answer.stderr.rstrip("\n").splitlines()[-1] == (
        "[venv_only_pkg is not in the kernel venv, and cells import from no other (workspace_venv is off): the user "
        "can add it to the kernel venv: eukhe kernel install --with venv_only_pkg]"
    ), answer.stderr
