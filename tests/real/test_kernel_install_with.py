"""`eukhe kernel install --with` (docs/kernel-install.md, "Packages for the kernel venv"): a package from a local
wheel the test writes is resolved into a lock with its hash, installed into the kernel venv, recorded beside it, and
kept by a session's rebuild with the network taken away; a lock whose hash does not match fails the install;
`--without` takes it out; a user Python and a name that is not a plain requirement are refused."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eukhe.core.kernel_local import Purpose
from eukhe.kernel.bootstrap import check_state, setup_step
from eukhe.kernel.bootstrap.added import read_added
from eukhe.kernel.bootstrap.venv import kernel_paths, read_stamp
from tests.real.test_kernel_install_real import (  # noqa: F401  (fixtures)
    BASE_PYTHON,
    child_env,
    home,
    needs_unshare,
    session_without_network,
    uv_cache,
)
from tests.real.wheel_support import write_wheel

pytestmark = pytest.mark.real


def eukhe(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", *args],
        capture_output=True,
        text=True,
        env=child_env(**env),
        timeout=600,
        check=False,
    )


def venv_imports(code: str) -> subprocess.CompletedProcess[str]:
    """The kernel venv's Python, isolated (no PYTHONPATH), running `code`."""
    return subprocess.run(
        [str(kernel_paths().python), "-I", "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@needs_unshare
@pytest.mark.usefixtures("home")
def test_a_package_added_from_a_local_wheel_is_hash_locked_and_an_offline_rebuild_keeps_it(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheel = write_wheel(wheels, "addpkg_demo", source="VALUE = 'added'\n")
    done = eukhe(
        "kernel", "install", "--python", BASE_PYTHON, "--with", "addpkg_demo", "--json", UV_FIND_LINKS=str(wheels)
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["built"], answer["added_packages"]) == (True, ["addpkg_demo"])
    # The lock pins the wheel by its hash, names where it lies, and leaves the kernel lock's packages to that lock.
    record = read_added(kernel_paths())
    assert record is not None
    assert record.requirements == ["addpkg_demo"]
    assert f"--find-links {wheels}" in record.lock
    assert f"--hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}" in record.lock
    assert "msgspec" not in record.lock and "tabulate" not in record.lock
    assert venv_imports("import addpkg_demo, msgspec; print(addpkg_demo.VALUE)").stdout == "added\n"
    state = json.loads(eukhe("kernel", "install", "--check", "--json").stdout)
    assert (state["state"], state["added_packages"]) == ("ready", ["addpkg_demo"])
    again = eukhe("kernel", "install", "--json")  # nothing new: kept, no command, nothing fetched
    assert (json.loads(again.stdout)["built"], json.loads(again.stdout)["commands"]) == (False, [])

    # After an update the venv is of another build: a session rebuilds it with no network, the package included.
    paths = kernel_paths()
    stamp_data = json.loads(paths.stamp.read_text())
    stamp_data["build"] = "0" * 64
    paths.stamp.write_text(json.dumps(stamp_data))
    assert check_state().state == "stale"
    rebuilt = session_without_network(child_env())
    assert rebuilt == {"network": False, "python": str(paths.python)}
    stamp = read_stamp(paths.venv)
    assert stamp is not None and stamp.build == setup_step(Purpose.SESSION, paths).build
    assert venv_imports("import addpkg_demo; print(addpkg_demo.VALUE)").stdout == "added\n"

    # And a session's cell imports it.
    from eukhe.api import Session, Settled

    async def cell() -> object:
        session = await Session.create(tmp_path, root=tmp_path / "sessions")
        try:
            return await session.ipython("import addpkg_demo\naddpkg_demo.VALUE", budget_ms=60_000)
        finally:
            await session.close()

    answer_cell = asyncio.run(cell())
    assert isinstance(answer_cell, Settled) and answer_cell.result == "'added'", answer_cell

    # --without takes it out: the venv is built again without it and the record is gone.
    removed = eukhe("kernel", "install", "--without", "addpkg-demo", "--json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["added_packages"] == []
    assert read_added(kernel_paths()) is None
    assert "ModuleNotFoundError" in venv_imports("import addpkg_demo").stderr


@pytest.mark.usefixtures("home")
def test_a_lock_whose_hash_does_not_match_fails_the_install_and_the_venv_stays(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "addpkg_demo")
    done = eukhe("kernel", "install", "--python", BASE_PYTHON, "--with", "addpkg_demo", UV_FIND_LINKS=str(wheels))
    assert done.returncode == 0, done.stderr
    paths = kernel_paths()
    stamp = read_stamp(paths.venv)
    # The record's lock names another hash for the same wheel (what a swapped wheel would look like to uv).
    data = json.loads(paths.added.read_text())
    data["lock"] = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, data["lock"])
    paths.added.write_text(json.dumps(data))
    failed = eukhe("kernel", "install")
    assert failed.returncode != 0
    assert "lock_install" in failed.stdout + failed.stderr
    assert "Hash mismatch" in failed.stdout + failed.stderr, failed.stderr
    assert read_stamp(paths.venv) == stamp  # the venv that was there is still there, untouched


@pytest.mark.usefixtures("home")
def test_a_user_python_and_a_name_that_is_not_a_requirement_are_refused(tmp_path: Path) -> None:
    bad = eukhe("kernel", "install", "--with", "x; rm -rf /")
    assert bad.returncode == 2
    assert "not a package name" in bad.stderr
    assert not kernel_paths().venv.exists()  # refused before anything ran
    user = eukhe("kernel", "install", "--with", "pandas", "--json", EUKHE_KERNEL_PYTHON=sys.executable)
    assert user.returncode != 0
    assert json.loads(user.stdout)["error"] == "kernel_added_packages", user.stdout
    checked = eukhe("kernel", "install", "--check", "--with", "pandas")
    assert checked.returncode == 2 and "--check changes nothing" in checked.stderr
