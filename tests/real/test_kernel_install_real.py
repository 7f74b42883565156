"""Real installs of the kernel venv with uv into temporary homes (spec "The kernel environment").

Each test installs into its own agent dir with an existing interpreter (`--python`); one uv cache is shared by the
whole run, so only the first install reaches PyPI. The offline rebuild runs in a network namespace made with
`unshare -n`, where nothing can be downloaded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eukhe.core.kernel_local import KERNEL_MISSING_TEXT, LOCK_NAME, BesideKind, Owner, beside_name, format_owner
from eukhe.kernel.bootstrap import (
    KernelNotInstalledError,
    KernelSetupError,
    check_state,
    ensure_kernel_python,
    install_kernel_python,
)
from eukhe.kernel.bootstrap.uvtool import find_uv
from eukhe.kernel.bootstrap.venv import (
    KERNEL_LOCK,
    KERNEL_PYTHON_VERSION,
    build_id,
    kernel_package_dir,
    kernel_paths,
    read_stamp,
)
from tests.real.process_support import spawned
from tests.real.tools import missing_reason

pytestmark = pytest.mark.real

BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)
"""An existing interpreter to build on: this machine cannot reach uv's Python downloads."""
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uv cache for every real install of the run."""
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture
def home(tmp_path: Path, uv_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh agent dir (EUKHE_CODING_AGENT_DIR) using the shared uv cache; no user Python, default venv path."""
    agent = tmp_path / "agent"
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))
    monkeypatch.delenv("EUKHE_KERNEL_VENV", raising=False)
    monkeypatch.delenv("EUKHE_KERNEL_PYTHON", raising=False)
    return agent


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def leftovers(agent: Path) -> set[str]:
    """Files of the lock or of a build beside the venv: none may stay after a setup."""
    if not agent.exists():
        return set()
    return {n for n in os.listdir(agent) if n.startswith((LOCK_NAME, "kernel-venv.staging-", "kernel-venv.old-"))}


def not_private(root: Path) -> list[str]:
    """Every directory under `root` (and itself) whose mode is not 0700."""
    found = [root, *(Path(base) / name for base, names, _ in os.walk(root) for name in names)]
    return [
        f"{oct(stat.S_IMODE(path.lstat().st_mode))} {path}"
        for path in found
        if not path.is_symlink() and stat.S_IMODE(path.lstat().st_mode) != 0o700
    ]


def install(python: str = BASE_PYTHON, **kwargs: object) -> bool:
    return asyncio.run(install_kernel_python(python, **kwargs)).built  # type: ignore[arg-type]


def test_a_real_install_builds_a_checked_venv_that_runs_the_kernel(home: Path) -> None:
    assert check_state().state == "absent"
    result = asyncio.run(install_kernel_python(BASE_PYTHON))
    assert result.built
    paths = kernel_paths()
    assert result.python == paths.python
    stamp = read_stamp(paths.venv)
    assert stamp is not None
    assert stamp.build == build_id()
    assert not_private(home) == []  # what uv and venv made under the agent dir is the user's alone too
    # The venv's Python imports the installed stub (not the repo's: no PYTHONPATH) and the locked packages.
    probe = subprocess.run(
        [str(paths.python), "-I", "-c", "import eukhe_kernel, tabulate, msgspec; print(eukhe_kernel.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    installed = Path(probe.stdout.strip()).parent
    assert installed.is_relative_to(paths.venv)
    for source in kernel_package_dir().rglob("*.py"):
        assert (installed / source.relative_to(kernel_package_dir())).read_bytes() == source.read_bytes()
    assert leftovers(home) == set()
    # A second run keeps the installed venv and runs no command at all (so downloads nothing).
    again = asyncio.run(install_kernel_python(BASE_PYTHON))
    assert (again.built, again.commands) == (False, [])
    assert asyncio.run(install_kernel_python()).built is False  # without --python: the recorded Python is kept
    assert asyncio.run(ensure_kernel_python()) == paths.python
    state = check_state()
    assert (state.state, state.ready, state.python) == ("ready", True, str(paths.python))


def test_the_cli_installs_and_checks(home: Path) -> None:
    def eukhe(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eukhe.cli.main", *args],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
            check=False,
        )

    before = eukhe("kernel", "install", "--check", "--json")
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout)["state"] == "absent"
    done = eukhe("kernel", "install", "--python", BASE_PYTHON, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["built"] is True
    after = json.loads(eukhe("kernel", "install", "--check", "--json").stdout)
    assert (after["state"], after["ready"]) == ("ready", True)
    text = eukhe("kernel", "install")
    assert "already installed" in text.stdout
    bad = eukhe("kernel", "install", "--python", "/nonexistent/python", "--json")
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["error"] == "kernel_setup_failed"


def network_namespace_refusal() -> str | None:
    """Why `unshare -n` cannot make a network namespace here, or None when it can."""
    missing = missing_reason("unshare")
    if missing is not None:
        return missing
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return None if probe.returncode == 0 else "cannot make a network namespace here"


NETWORK_NAMESPACE_REFUSAL = network_namespace_refusal()
needs_unshare = pytest.mark.skipif(NETWORK_NAMESPACE_REFUSAL is not None, reason=NETWORK_NAMESPACE_REFUSAL or "")

SESSION_SCRIPT = """
import asyncio, json, socket, sys
try:
    socket.create_connection(("pypi.org", 443), timeout=3).close()
    network = True
except OSError:
    network = False
from eukhe.kernel.bootstrap import ensure_kernel_python, KernelNotInstalledError
try:
    print(json.dumps({"network": network, "python": str(asyncio.run(ensure_kernel_python()))}))
except KernelNotInstalledError as error:
    print(json.dumps({"network": network, "error": str(error), "cause": error.cause}))
"""


def session_without_network(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", SESSION_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@needs_unshare
def test_a_session_rebuilds_a_venv_of_another_build_with_the_network_taken_away(home: Path) -> None:
    assert install()
    paths = kernel_paths()
    stamp_data = json.loads(paths.stamp.read_text())
    stamp_data["build"] = "0" * 64  # the venv of the build before an update
    paths.stamp.write_text(json.dumps(stamp_data))
    assert check_state().state == "stale"
    before = paths.venv.stat().st_ino
    answer = session_without_network(child_env())
    assert answer == {"network": False, "python": str(paths.python)}
    assert paths.venv.stat().st_ino != before  # rebuilt, not patched
    stamp = read_stamp(paths.venv)
    assert stamp is not None
    assert stamp.build == build_id()
    assert leftovers(home) == set()
    probe = subprocess.run([str(paths.python), "-I", "-c", "import eukhe_kernel, tabulate"], timeout=60, check=False)
    assert probe.returncode == 0


@needs_unshare
def test_a_session_without_local_files_answers_the_install_text(home: Path, tmp_path: Path) -> None:
    assert install()
    paths = kernel_paths()
    shutil.rmtree(paths.venv)  # the venv is gone; the record of the install stays
    empty_cache = tmp_path / "empty-cache"
    answer = session_without_network(child_env(UV_CACHE_DIR=str(empty_cache)))
    assert answer["network"] is False
    assert answer["error"] == KERNEL_MISSING_TEXT
    assert "lock_install" in str(answer["cause"])
    assert not paths.venv.exists()
    assert leftovers(home) == set()


def test_missing_kernel_names_the_install_and_other_work_goes_on(home: Path) -> None:
    async def session() -> tuple[BaseException | Path, bytes]:
        async def other_tool() -> bytes:
            process = await asyncio.create_subprocess_exec(
                "bash", "-c", "echo bash runs", stdout=asyncio.subprocess.PIPE
            )
            out, _ = await process.communicate()
            return out

        kernel, out = await asyncio.gather(ensure_kernel_python(), other_tool(), return_exceptions=True)
        assert isinstance(out, bytes)
        return kernel, out

    kernel, out = asyncio.run(session())
    assert isinstance(kernel, KernelNotInstalledError)
    assert str(kernel) == "The Python kernel is not installed: run `eukhe kernel install` once"
    assert kernel.code == "kernel_not_installed"
    assert out == b"bash runs\n"
    assert not home.exists() or leftovers(home) == set()


def test_a_user_python_installs_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EUKHE_KERNEL_PYTHON", BASE_PYTHON)
    assert asyncio.run(ensure_kernel_python()) == Path(BASE_PYTHON)
    result = asyncio.run(install_kernel_python())
    assert (result.user_python, result.built, result.python) == (True, False, Path(BASE_PYTHON))
    assert not home.exists()  # nothing installed, not even the agent dir
    state = check_state()
    assert (state.state, state.user_python, state.ready) == ("user_python", BASE_PYTHON, True)


@pytest.mark.parametrize("damage", ["tampered hash", "missing hash"])
def test_a_bad_lock_fails_the_install_and_nothing_half_installed_is_used(
    home: Path, tmp_path: Path, damage: str
) -> None:
    lock = tmp_path / "requirements-kernel.txt"
    text = KERNEL_LOCK.read_text()
    if damage == "tampered hash":
        lock.write_text(re.sub(r"sha256:[0-9a-f]{4}", "sha256:0000", text))  # every hash of every requirement
    else:
        lock.write_text("\n".join(line for line in text.splitlines() if "--hash" not in line).replace(" \\", ""))
    with pytest.raises(KernelSetupError) as failure:
        asyncio.run(install_kernel_python(BASE_PYTHON, lock=lock))
    assert failure.value.action == "lock_install"
    message = str(failure.value)
    assert message.startswith("kernel install failed at step lock_install")
    assert ("Hash mismatch" if damage == "tampered hash" else "must have a hash") in message
    paths = kernel_paths()
    assert not paths.venv.exists()
    assert not paths.record.exists()
    assert leftovers(home) == set()
    assert check_state(lock=lock).state == "absent"
    with pytest.raises(KernelNotInstalledError):
        asyncio.run(ensure_kernel_python(lock=lock))


RACER = """
import asyncio, json, sys
from eukhe.kernel.bootstrap import install_kernel_python
sys.stdin.readline()  # start together
result = asyncio.run(install_kernel_python(sys.argv[1]))
print(json.dumps({"built": result.built, "python": str(result.python), "waited": result.waited}))
"""


def test_racing_processes_set_up_the_venv_once(home: Path) -> None:
    with spawned() as started:
        racers = [
            started.add(
                subprocess.Popen(
                    [sys.executable, "-c", RACER, BASE_PYTHON],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=child_env(),
                )
            )
            for _ in range(4)
        ]
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        answers = []
        for racer in racers:
            out, err = racer.communicate(timeout=180)
            assert racer.returncode == 0, err
            answers.append(json.loads(out))
    assert sorted(a["built"] for a in answers) == [False, False, False, True]
    assert any(a["waited"] for a in answers if not a["built"])  # they waited for the builder, then used its venv
    assert {a["python"] for a in answers} == {str(kernel_paths().python)}
    assert leftovers(home) == set()
    assert check_state().state == "ready"


HANGING_UV = """#!/bin/sh
# A uv that hangs in the middle of a build (at the locked wheels), after telling the test it got there.
if [ "$1" = "pip" ] && [ "$2" = "install" ]; then
  echo started > "$EUKHE_TEST_MARKER"
  exec sleep 300
fi
exec "$EUKHE_TEST_REAL_UV" "$@"
"""


def wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.02)


@pytest.fixture
def hanging_uv(tmp_path: Path) -> Iterator[Path]:
    real = find_uv()
    assert real is not None
    script = tmp_path / "uv"
    script.write_text(HANGING_UV)
    script.chmod(0o755)
    return script


def test_a_holder_killed_mid_build_is_swept_and_the_next_attempt_builds(
    home: Path, tmp_path: Path, hanging_uv: Path
) -> None:
    marker = tmp_path / "marker"
    real = find_uv()
    holder = subprocess.Popen(
        [sys.executable, "-c", RACER, BASE_PYTHON],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env=child_env(UV=str(hanging_uv), EUKHE_TEST_MARKER=str(marker), EUKHE_TEST_REAL_UV=str(real)),
        start_new_session=True,
    )
    try:
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.flush()
        wait_for(marker, 60)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        if holder.stdin is not None:
            holder.stdin.close()
    lock_path = home / LOCK_NAME
    assert lock_path.read_text().split()[0] == str(holder.pid)  # the dead holder's lock stays behind
    assert any(name.startswith("kernel-venv.staging-") for name in os.listdir(home))
    # A candidate and a set-aside lock of the dead process, as a kill inside an attempt leaves them.
    (home / beside_name(BesideKind.CANDIDATE, holder.pid, 5)).write_text(format_owner(Owner(holder.pid, 1)))
    (home / beside_name(BesideKind.STALE, holder.pid, 6)).write_text("")
    assert install()
    assert leftovers(home) == set()
    assert check_state().state == "ready"


def mirror_path_uv_asks_for(uv: Path, tmp_path: Path) -> Path:
    """Where, under a file:// mirror, uv looks for the pinned Python's archive (it names it when it is missing)."""
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    env = dict(os.environ, UV_PYTHON_INSTALL_MIRROR=empty.as_uri(), UV_PYTHON_INSTALL_DIR=str(tmp_path / "probe"))
    done = subprocess.run(
        [str(uv), "python", "install", "--no-bin", KERNEL_PYTHON_VERSION],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    found = re.search(r"`(/[^`]+\.tar\.(?:gz|zst))`", done.stderr)
    assert found, done.stderr
    return Path(found.group(1)).relative_to(empty)


def test_the_download_branch_checks_the_python_archive_before_use(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eukhe kernel install` without --python fetches uv's pinned Python; a forged archive never gets used."""
    uv = find_uv()
    assert uv is not None
    mirror = tmp_path / "mirror"
    archive = mirror / mirror_path_uv_asks_for(uv, tmp_path)
    archive.parent.mkdir(parents=True)
    forged = tmp_path / "forged" / "python" / "bin"
    forged.mkdir(parents=True)
    (forged / "python3").write_text("#!/bin/sh\necho forged\n")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(forged.parent, arcname="python")
    monkeypatch.setenv("UV_PYTHON_INSTALL_MIRROR", mirror.as_uri())
    with pytest.raises(KernelSetupError) as failure:
        asyncio.run(install_kernel_python())
    assert failure.value.action == "python_install"
    assert failure.value.argv[1:3] == ("python", "install")
    assert "--offline" not in failure.value.argv  # the one step allowed to download
    assert "Hash mismatch" in str(failure.value)
    assert "eukhe kernel install --python" in str(failure.value)  # the way out on a machine like this one
    installs = kernel_paths().python_installs
    assert not installs.exists() or not [p for p in installs.iterdir() if p.name.startswith("cpython")]
    assert not kernel_paths().venv.exists()
    assert leftovers(home) == set()


NO_UV_SCRIPT = """
import asyncio, json, sys
from eukhe.kernel.bootstrap import KernelNotInstalledError, ensure_kernel_python, install_kernel_python
from eukhe.kernel.bootstrap.uvtool import find_uv
answer = {"found_before": str(find_uv()) if find_uv() else None}
try:
    asyncio.run(ensure_kernel_python())
except KernelNotInstalledError as error:
    answer["session"] = [str(error), error.cause]
result = asyncio.run(install_kernel_python(sys.argv[1]))
answer["built"] = result.built
answer["found_after"] = str(find_uv())
print(json.dumps(answer))
"""


@pytest.mark.slow
def test_uv_is_installed_with_its_hashes_only_by_the_install_command(home: Path, tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    path = f"{empty_bin}:/usr/bin:/bin"
    if shutil.which("uv", path=path):
        pytest.skip("a system uv is on /usr/bin")
    env = child_env(PATH=path)
    env.pop("UV", None)
    # A record of an install, so that a session would rebuild (and needs uv) instead of answering "not installed".
    home.mkdir(parents=True)
    (home / "kernel-venv.install.json").write_text(json.dumps({"source": "given", "value": BASE_PYTHON}))
    done = subprocess.run(
        [sys.executable, "-c", NO_UV_SCRIPT, BASE_PYTHON],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["found_before"] is None
    assert answer["session"][0] == KERNEL_MISSING_TEXT  # a session never installs uv
    assert "uv was not found" in answer["session"][1]
    assert answer["built"] is True
    assert answer["found_after"] == str(home / "tools" / "uv" / "bin" / "uv")


def test_check_tells_the_truth_in_each_state(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def state() -> object:
        return check_state().state

    assert state() == "absent"
    assert install()
    assert state() == "ready"
    paths = kernel_paths()
    stamp = json.loads(paths.stamp.read_text())
    paths.stamp.write_text(json.dumps({**stamp, "build": "another build"}))
    assert state() == "stale"
    paths.stamp.unlink()
    assert state() == "unchecked"  # e.g. a venv whose build was cut before its check
    assert asyncio.run(ensure_kernel_python()) == paths.python  # a session rebuilds it (offline) and uses it
    assert state() == "ready"
    monkeypatch.setenv("EUKHE_KERNEL_PYTHON", BASE_PYTHON)
    assert (state(), check_state().user_python) == ("user_python", BASE_PYTHON)


def test_after_a_real_install_a_sessions_cells_run_on_that_venv(home: Path, tmp_path: Path) -> None:
    """End to end: `eukhe kernel install`, then a session's `ipython` cells run on the venv it made."""
    from eukhe.api import Session, Settled

    assert install()
    paths = kernel_paths()

    async def cells() -> tuple[object, object]:
        session = await Session.create(tmp_path, root=tmp_path / "sessions")
        try:
            first = await session.ipython("import sys, tabulate; sys.executable", budget_ms=20_000)
            second = await session.ipython("x = 6 * 7\nx", budget_ms=20_000)
        finally:
            await session.close()
        return first, second

    first, second = asyncio.run(cells())
    assert isinstance(first, Settled)
    assert isinstance(second, Settled)
    assert first.result == repr(str(paths.python))
    assert second.result == "42"


def test_kernel_missing_spares_tools_in_a_session(home: Path, tmp_path: Path) -> None:
    """A session whose kernel cannot be set up: `ipython` names the install; the session opens and bash runs."""
    from eukhe.api import Session

    async def session_work() -> tuple[BaseException, dict[str, object]]:
        session = await Session.create(tmp_path, root=tmp_path / "sessions")
        try:
            with pytest.raises(KernelNotInstalledError) as missing:
                await session.ipython("1 + 1", budget_ms=5_000)
            ran = await session.execute_bash_and_wait("echo bash runs", budget_ms=10_000)
            return missing.value, ran.to_json()
        finally:
            await session.close()

    error, ran = asyncio.run(session_work())
    assert str(error) == KERNEL_MISSING_TEXT
    assert ran["exit_code"] == 0
    assert ran["output"]["text"] == "bash runs\n"  # type: ignore[index]
