"""The escape battery, continued: a confined job cannot make the user's next git command run its code, plant what the
next session or model reads (`.claude`, `.agents`, `.eukhe`, also where they do not exist), change a toolchain cache
that venvs and tools outside the session use, or read the credential stores of common tools. Each attempt succeeds
with `--sandbox off`, so that each test can fail. Real bubblewrap, real git, a real daemon, the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv
from tests.real.test_sandbox_escapes import MODES, Box, git, make_box

pytestmark = pytest.mark.real


@pytest.fixture(params=MODES)
def box(world: DaemonEnv, request: pytest.FixtureRequest) -> Iterator[Box]:
    base = Path(tempfile.mkdtemp(prefix="eukhe-box-", dir="/var/tmp"))
    (base / "home" / ".cache" / "uv").mkdir(parents=True)
    (base / "home" / ".cache" / "uv" / "shared.py").write_text("CLEAN = True\n")
    try:
        yield make_box(world, request.param, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def users_git_status(repo: Path) -> subprocess.CompletedProcess[str]:
    """The user's next `git status` in the repository, outside eukhe (with git's own config lookup)."""
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=False)


def planted(box: Box, name: str) -> tuple[Path, str]:
    """A marker the planted command would make on the host, and a git config that runs that command."""
    marker = box.outside.parent / f"ran-{name}"
    return marker, f"[core]\n\tfsmonitor = touch {marker}; false\n"


def test_a_renamed_and_rebuilt_git_directory_is_refused(box: Box) -> None:
    marker, config = planted(box, "renamed")
    box.bash(
        f"mv .git .git-away && mkdir .git && cp -r .git-away/* .git/ 2>/dev/null; printf '{config}' >> .git/config"
    )
    users_git_status(box.project)
    assert marker.exists() is not box.confined
    assert (box.project / ".git" / "HEAD").exists()


def test_a_git_directory_replaced_by_a_pointer_file_is_refused(box: Box) -> None:
    marker, config = planted(box, "pointer")
    evil = box.project / "evil"
    box.bash(
        f"mkdir -p evil && cp -r .git/* evil/ && printf '{config}' >> evil/config && "
        "rm -rf .git 2>/dev/null; mv .git .git-gone 2>/dev/null; echo 'gitdir: evil' > .git"
    )
    users_git_status(box.project)
    assert marker.exists() is not box.confined
    assert evil.exists()


def test_a_commondir_of_the_job_is_refused_or_undone(box: Box) -> None:
    marker, config = planted(box, "commondir")
    box.bash(
        f"mkdir -p common && cp -r .git/* common/ && printf '{config}' >> common/config && "
        "echo ../common > .git/commondir"
    )
    users_git_status(box.project)
    assert marker.exists() is not box.confined


def with_submodule(box: Box) -> Path:
    """A submodule `lib` (from a local repository) in the box's project, committed."""
    upstream = box.outside.parent / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q")
    (upstream / "f").write_text("lib\n")
    git(upstream, "add", ".")
    git(upstream, "commit", "-qm", "lib")
    git(box.project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "lib")
    git(box.project, "commit", "-qm", "with lib")
    return box.project / ".git" / "modules" / "lib"


def test_a_submodules_config_is_audited_and_its_hooks_protected(world: DaemonEnv, box: Box) -> None:
    modules = with_submodule(box)
    session = world.json(
        "session", "create", "--cwd", str(box.project), "--sandbox", "workspace_write" if box.confined else "off"
    )["id"]
    marker, config = planted(box, "submodule")
    world.json(
        "bash",
        "--session",
        session,
        "--",
        f"printf '{config}' >> .git/modules/lib/config; "
        f"echo 'touch {marker}' > .git/modules/lib/hooks/pre-commit; chmod +x .git/modules/lib/hooks/pre-commit",
    )
    (box.project / "lib" / "f").write_text("changed\n")
    users_git_status(box.project)
    assert marker.exists() is not box.confined
    assert (modules / "hooks" / "pre-commit").exists() is not box.confined


def test_a_linked_worktrees_pointers_are_protected(world: DaemonEnv, box: Box) -> None:
    git(box.project, "worktree", "add", "-q", str(box.outside.parent / "wt"))
    session = world.json(
        "session", "create", "--cwd", str(box.project), "--sandbox", "workspace_write" if box.confined else "off"
    )["id"]
    marker, config = planted(box, "worktree")
    world.json(
        "bash",
        "--session",
        session,
        "--",
        f"mkdir -p common && cp -r .git/* common/ && printf '{config}' >> common/config && "
        f"echo {box.project}/common > .git/worktrees/wt/commondir",
    )
    users_git_status(box.outside.parent / "wt")
    assert marker.exists() is not box.confined


@pytest.mark.parametrize("directory", [".claude", ".agents", ".eukhe"])
def test_a_protected_directory_cannot_be_made_or_written(box: Box, directory: str) -> None:
    skill = box.project / directory / "skills" / "planted" / "SKILL.md"
    box.bash(f"mkdir -p {skill.parent} && echo planted > {skill}")
    assert skill.exists() is not box.confined
    code, _ = box.world.json_any("fs", "write", str(skill), "--session", box.session, "--content", "x")
    assert (code != 0) is box.confined


def test_an_existing_claude_settings_file_is_read_only(box: Box) -> None:
    settings = box.project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}")
    session = box.world.json(
        "session", "create", "--cwd", str(box.project), "--sandbox", "workspace_write" if box.confined else "off"
    )["id"]
    box.world.json("bash", "--session", session, "--", """echo '{"hooks": {}}' > .claude/settings.json""")
    assert (settings.read_text() == "{}") is box.confined


def test_a_toolchain_cache_is_copy_on_write(box: Box) -> None:
    shared = box.home / ".cache" / "uv" / "shared.py"
    inside = box.text(f"echo 'import os; os.system(\"id\")' >> {shared} && cat {shared}")
    assert "os.system" in inside, "the job writes its own copy of the cache"
    assert ("os.system" in shared.read_text()) is not box.confined, "the host's cache is unchanged"


CREDENTIAL_FILES = [
    ".config/git/credentials",
    ".cargo/credentials.toml",
    ".cache/huggingface/token",
    ".codex/auth.json",
    ".claude/.credentials.json",
    ".vault-token",
    ".pgpass",
]


def test_the_credential_stores_of_common_tools_are_unreadable(box: Box) -> None:
    for relative in CREDENTIAL_FILES:
        path = box.home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"secret-of-{relative}\n")
    session = box.world.json(
        "session", "create", "--cwd", str(box.project), "--sandbox", "workspace_write" if box.confined else "off"
    )["id"]
    for relative in CREDENTIAL_FILES:
        text = box.world.json("bash", "--session", session, "--", f"cat ~/{relative}")["output"]["text"]
        assert (f"secret-of-{relative}" in text) is not box.confined, relative
        code, _ = box.world.json_any("fs", "read", str(box.home / relative), "--session", session)
        assert (code != 0) is box.confined, relative


def test_a_nested_repository_linked_into_the_index_loses_what_would_run_code(box: Box) -> None:
    """`git status` in the outer repository runs `git status` in each gitlinked one, with its config: a job that
    plants such a repository has its config's program keys removed, and the answer says so."""
    marker, config = planted(box, "nested")
    answer = box.bash(
        "mkdir inner && cd inner && git init -q && "
        "git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && "
        f"printf '{config}' >> .git/config && echo dirty > f && cd .. && "
        "git update-index --add --cacheinfo 160000,$(git -C inner rev-parse HEAD),inner"
    )
    assert answer["exit_code"] == 0, answer
    users_git_status(box.project)
    assert marker.exists() is not box.confined
    notices = " ".join(answer.get("notices", []))
    assert ("core.fsmonitor" in notices) is box.confined, answer


def test_a_repository_a_job_makes_where_there_was_none_loses_what_would_run_code(box: Box) -> None:
    """A job in a directory without `.git` runs `git init` and writes a program into the new config and a hook: the
    answer's audit removes both (the samples stay), so the user's next `git status` and commit there run nothing."""
    fresh = box.project.parent / "fresh"
    fresh.mkdir()
    mode = "workspace_write" if box.confined else "off"
    session = box.world.json("session", "create", "--cwd", str(fresh), "--sandbox", mode)["id"]
    marker, config = planted(box, "made")
    hook_marker = box.project.parent / "ran-made-hook"
    answer = box.world.json(
        "bash",
        "--session",
        session,
        "--",
        f"git init -q && printf '{config}' >> .git/config && "
        f"printf '#!/bin/sh\\ntouch {hook_marker}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    )
    assert answer["exit_code"] == 0, answer
    users_git_status(fresh)
    assert marker.exists() is not box.confined
    assert (fresh / ".git" / "hooks" / "pre-commit").exists() is not box.confined
    assert any(name.endswith(".sample") for name in os.listdir(fresh / ".git" / "hooks"))
    notices = " ".join(answer.get("notices", []))
    assert ("core.fsmonitor" in notices and "pre-commit" in notices) is box.confined, answer


def test_a_commondir_is_removed_while_the_job_that_made_it_still_runs(box: Box) -> None:
    """A background job's `commondir` is undone as it appears, not only at the job's end."""
    if not box.confined:
        pytest.skip("the watch belongs to a confined session")
    flag = box.project / "made"
    box.world.json(
        "bash",
        "--session",
        box.session,
        "--budget-ms",
        "0",
        "--",
        f"echo ../x > .git/commondir; touch {flag.name}; sleep 600",
    )
    deadline = time.monotonic() + 30
    while not flag.exists() or (box.project / ".git" / "commondir").exists():
        assert time.monotonic() < deadline, "the commondir is still there"
        time.sleep(0.01)
