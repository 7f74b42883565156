"""The uv commands of the core's plans (spec "The kernel environment" 1-2), and what the runtime is built from."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from eukhe.core.kernel_local import (
    Action,
    Build,
    Purpose,
    PythonSource,
    SetupFacts,
    VenvState,
    plan_setup,
)
from eukhe.kernel.bootstrap.venv import (
    KERNEL_LOCK,
    KERNEL_PYTHON_VERSION,
    MANAGED_PYTHON,
    RUNTIME_DIR,
    PythonChoice,
    assemble_runtime,
    build_id,
    kernel_package_dir,
    runtime_sources,
    skill_install_args,
    venv_build_commands,
)

UV = Path("/opt/uv/bin/uv")
VENV = Path("/home/me/.eukhe/kernel-venv.staging-1-0/venv")
SOURCE = Path("/home/me/.eukhe/kernel-venv.staging-1-0/runtime-src")
GIVEN = PythonChoice(PythonSource.GIVEN, "/usr/bin/python3.11")


def all_builds() -> list[tuple[SetupFacts, Build]]:
    """Every Build the core plans, with its facts."""
    builds = []
    for purpose in Purpose:
        for venv in VenvState:
            for recorded in (None, *PythonSource):
                for requested in PythonSource:
                    facts = SetupFacts(purpose, False, venv, recorded, requested)
                    step = plan_setup(facts)
                    if isinstance(step, Build):
                        builds.append((facts, step))
    return builds


def test_venv_builds_only_from_the_hash_locked_runtime_source() -> None:
    builds = all_builds()
    assert {facts.purpose for facts, _ in builds} == {Purpose.INSTALL, Purpose.SESSION}
    for facts, plan in builds:
        python = MANAGED_PYTHON if plan.python is PythonSource.MANAGED else GIVEN
        commands = venv_build_commands(plan, uv=UV, python=python, venv=VENV, lock=KERNEL_LOCK, runtime_source=SOURCE)
        assert [c.action for c in commands] == [c.action for c in plan.commands]
        for planned, command in zip(plan.commands, commands, strict=True):
            argv = list(command.argv)
            assert argv[0] == str(UV)
            # --offline exactly where the plan says; a session's plan has it on every command.
            assert ("--offline" in argv) == planned.offline, (facts, argv)
            if facts.purpose is Purpose.SESSION:
                assert "--offline" in argv
            # No other source of packages: no index, no find-links, no package named on the command line.
            assert not {"--index-url", "--extra-index-url", "--find-links", "-f", "--index"} & set(argv)
            if command.action is Action.LOCK_INSTALL:
                assert argv[1:3] == ["pip", "install"]
                assert {"--require-hashes", "--no-deps"} & set(argv) == {"--require-hashes"}
                assert argv[argv.index("--only-binary") + 1] == ":all:"
                assert argv[argv.index("-r") + 1] == str(KERNEL_LOCK)
                assert argv[-1] == str(KERNEL_LOCK)
            elif command.action is Action.RUNTIME_INSTALL:
                assert argv[1:3] == ["pip", "install"]
                assert "--offline" in argv
                assert "--no-deps" in argv
                assert argv[-1] == str(SOURCE)  # the runtime's local directory, nothing else
            elif command.action is Action.VENV:
                assert "--no-python-downloads" in argv
                assert argv[argv.index("--python") + 1] == python.value
                assert argv[-1] == str(VENV)
            elif command.action is Action.PYTHON_INSTALL:
                assert facts.purpose is Purpose.INSTALL
                assert argv[1:3] == ["python", "install"]
                assert argv[-1] == KERNEL_PYTHON_VERSION
            else:
                assert argv[1:3] == ["pip", "check"]
            if command.action is not Action.PYTHON_INSTALL:
                assert "--python" in argv  # every pip command names the staging venv
                target = argv[argv.index("--python") + 1]
                assert target in (str(VENV / "bin" / "python"), python.value)


def test_the_download_branch_runs_exactly_these_commands() -> None:
    """The managed install, the branch this machine cannot run end to end: the exact argv, online where planned."""
    plan = plan_setup(SetupFacts(Purpose.INSTALL, False, VenvState.ABSENT, None, PythonSource.MANAGED))
    assert isinstance(plan, Build)
    commands = venv_build_commands(
        plan, uv=UV, python=MANAGED_PYTHON, venv=VENV, lock=KERNEL_LOCK, runtime_source=SOURCE
    )
    python = str(VENV / "bin" / "python")
    assert [list(c.argv) for c in commands] == [
        [str(UV), "python", "install", "--no-bin", KERNEL_PYTHON_VERSION],
        [
            str(UV),
            "venv",
            "--offline",
            "--no-python-downloads",
            "--managed-python",
            "--no-project",
            "--relocatable",
            "--python",
            KERNEL_PYTHON_VERSION,
            str(VENV),
        ],
        [
            str(UV),
            "pip",
            "install",
            "--python",
            python,
            "--require-hashes",
            "--only-binary",
            ":all:",
            "-r",
            str(KERNEL_LOCK),
        ],
        [str(UV), "pip", "install", "--offline", "--python", python, "--no-deps", str(SOURCE)],
        [str(UV), "pip", "check", "--offline", "--python", python],
    ]
    session = plan_setup(
        SetupFacts(Purpose.SESSION, False, VenvState.STALE, PythonSource.MANAGED, PythonSource.MANAGED)
    )
    assert isinstance(session, Build)
    rebuild = venv_build_commands(
        session, uv=UV, python=MANAGED_PYTHON, venv=VENV, lock=KERNEL_LOCK, runtime_source=SOURCE
    )
    assert [c.action for c in rebuild] == [Action.VENV, Action.LOCK_INSTALL, Action.RUNTIME_INSTALL, Action.CHECK]
    assert all("--offline" in c.argv for c in rebuild)


def test_the_lock_pins_every_requirement_with_a_hash() -> None:
    requirements = [line for line in KERNEL_LOCK.read_text().splitlines() if line and not line.startswith((" ", "#"))]
    assert requirements, "the lock names at least one package"
    text = KERNEL_LOCK.read_text()
    for requirement in requirements:
        assert "==" in requirement, requirement
        block = text.split(requirement, 1)[1].split("\n\n")[0]
        assert "--hash=sha256:" in block, requirement


def test_the_runtime_source_is_the_kernel_package_and_its_packaging(tmp_path: Path) -> None:
    sources = runtime_sources()
    names = [name for name, _ in sources]
    assert names[:2] == ["pyproject.toml", "eukhe_runtime_build.py"]
    package = kernel_package_dir()
    assert (package / "__init__.py").is_file()
    assert "eukhe_kernel/__init__.py" in names
    assert all(not name.endswith(".pyc") and "__pycache__" not in name for name in names)
    assemble_runtime(tmp_path)
    for name, path in sources:
        assert (tmp_path / name).read_bytes() == path.read_bytes()
    assert (RUNTIME_DIR / "pyproject.toml").is_file()


def test_the_build_id_changes_with_the_lock_and_with_the_runtime_source(tmp_path: Path) -> None:
    base = build_id()
    assert base == build_id()
    other_lock = tmp_path / "lock.txt"
    other_lock.write_bytes(KERNEL_LOCK.read_bytes() + b"\n")
    assert build_id(other_lock) != base
    package = tmp_path / "eukhe_kernel"
    shutil.copytree(kernel_package_dir(), package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert build_id(package_dir=package) == base
    (package / "__init__.py").write_bytes((package / "__init__.py").read_bytes() + b"# changed\n")
    assert build_id(package_dir=package) != base
    assert len(hashlib.sha256().hexdigest()) == len(base)


def test_a_skill_installs_from_its_directory_offline() -> None:
    python = str(VENV / "bin" / "python")
    argv = skill_install_args(UV, VENV / "bin" / "python", Path("/skills/plot"))
    assert argv == (str(UV), "pip", "install", "--offline", "--python", python, "--no-deps", "/skills/plot")


def test_the_added_packages_lock_is_installed_with_the_kernel_lock_under_the_same_hash_check() -> None:
    """`eukhe kernel install --with`: every build (a session's offline ones too) installs the added lock in the
    same `--require-hashes` command as the kernel lock; without one, the argv and the build id are as before."""
    added = SOURCE.parent / "added-lock.txt"
    for _, plan in all_builds():
        python = MANAGED_PYTHON if plan.python is PythonSource.MANAGED else GIVEN
        plain = venv_build_commands(plan, uv=UV, python=python, venv=VENV, lock=KERNEL_LOCK, runtime_source=SOURCE)
        with_added = venv_build_commands(
            plan, uv=UV, python=python, venv=VENV, lock=KERNEL_LOCK, runtime_source=SOURCE, added_lock=added
        )
        for before, after in zip(plain, with_added, strict=True):
            if after.action is Action.LOCK_INSTALL:
                assert list(after.argv) == [*before.argv, "-r", str(added)]
                assert "--require-hashes" in after.argv and ":all:" in after.argv
            else:
                assert after == before
    assert build_id(added=None) == build_id()
    assert build_id(added="a==1 \\\n    --hash=sha256:00\n") != build_id()
    assert build_id(added="a==1\n") != build_id(added="a==2\n")
