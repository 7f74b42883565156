"""A home is seen by confined processes as the default policy says wherever it lies, under the host's /tmp (which a
session replaces with its private one) as under /var/tmp: readable but for `deny_read`, writable only in the
toolchain caches (copy-on-write), and a write anywhere else in it fails visibly instead of landing in the private
/tmp. The user's git identity reaches a job from `~/.gitconfig` and `~/.config/git/config`, the file tools agree,
and the README's sandbox example holds. Real bubblewrap, real git, a real daemon, the CLI."""

from __future__ import annotations

import re
import shlex
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv
from tests.real.test_sandbox_escapes import SECRET, git
from tests.real.tools import missing_reason

pytestmark = [pytest.mark.real, pytest.mark.skipif(bool(missing_reason("bwrap", "git")), reason="bwrap, git")]

README = Path(__file__).resolve().parents[2] / "README.md"
HOME_BASES = ("/var/tmp", "/tmp")


@dataclass
class Home:
    """A fresh home (a key, a git identity split over git's two user files, a cache) under `base`, and a project."""

    world: DaemonEnv
    base: Path
    home: Path
    project: Path

    def session(self, cwd: Path | None = None, *options: str) -> str:
        return str(self.world.json("session", "create", "--cwd", str(cwd or self.project), *options)["id"])

    def bash(self, session: str, command: str) -> dict[str, object]:
        answer = self.world.json("bash", "--session", session, "--", command)
        assert isinstance(answer, dict)
        return answer

    def landed(self, name: str) -> list[Path]:
        """Every file called `name` in the world and the home's base: where a write that vanished would be (the
        private /tmp lives in the session's directory, in the world)."""
        return sorted({*self.world.root.rglob(name), *self.base.rglob(name)})


@pytest.fixture(params=HOME_BASES)
def fresh(world: DaemonEnv, request: pytest.FixtureRequest) -> Iterator[Home]:
    base = Path(tempfile.mkdtemp(prefix="eukhe-home-", dir=request.param))
    home = base / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    (home / ".gitconfig").write_text("[user]\n\tname = Home User\n")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "config").write_text("[user]\n\temail = home@eukhe.invalid\n")
    (home / ".cache" / "tool").mkdir(parents=True)
    world.env["HOME"] = str(home)
    for name in [name for name in world.env if name.startswith("GIT_CONFIG")]:
        del world.env[name]  # git in the jobs reads the user's files, as on a user's machine
    project = base / "project"
    project.mkdir()
    git(project, "init", "-q")
    try:
        yield Home(world, base, home, project)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_users_git_identity_reaches_a_confined_commit(fresh: Home) -> None:
    session = fresh.session()
    answer = fresh.bash(
        session, "git config user.name && git config user.email && git commit -q --allow-empty -m x && git log"
    )
    assert answer["exit_code"] == 0, answer
    text = str(answer["output"]["text"])  # type: ignore[index]
    assert "Home User <home@eukhe.invalid>" in text, text


def test_the_home_is_readable_but_the_denied_stores_and_writes_fail_visibly(fresh: Home) -> None:
    session = fresh.session()
    read = fresh.bash(session, "cat ~/.gitconfig")
    assert read["exit_code"] == 0 and "Home User" in str(read["output"]["text"]), read  # type: ignore[index]
    key = fresh.bash(session, "cat ~/.ssh/id_ed25519")
    assert key["exit_code"] != 0 and SECRET not in str(key["output"]), key
    for command in ("touch ~/planted", "mkdir -p ~/.local/lib/planted", "echo x >> ~/.gitconfig"):
        answer = fresh.bash(session, command)
        assert answer["exit_code"] != 0, (command, answer)
        assert "Read-only file system" in str(answer["output"]["text"]), (command, answer)  # type: ignore[index]
    assert fresh.landed("planted") == []
    assert (fresh.home / ".gitconfig").read_text() == "[user]\n\tname = Home User\n"


def test_a_cache_in_the_home_is_written_copy_on_write_and_the_host_keeps_its_own(fresh: Home) -> None:
    session = fresh.session()
    answer = fresh.bash(
        session, "mkdir ~/.cache/tool/made && echo kept > ~/.cache/tool/made/f && cat ~/.cache/tool/made/f"
    )
    assert answer["exit_code"] == 0 and "kept" in str(answer["output"]["text"]), answer  # type: ignore[index]
    assert not (fresh.home / ".cache" / "tool" / "made").exists()


def test_a_home_without_a_cache_gets_an_empty_one_that_jobs_write_copy_on_write(fresh: Home) -> None:
    """A fresh home often has no `~/.cache`: a confined launch makes it (empty, the user's alone), so that uv and pip
    cache there copy-on-write as in any other home instead of failing on a read-only file system."""
    cache = fresh.home / ".cache"
    shutil.rmtree(cache)
    session = fresh.session()
    answer = fresh.bash(session, "mkdir -p ~/.cache/uv && echo kept > ~/.cache/uv/f && cat ~/.cache/uv/f")
    assert answer["exit_code"] == 0 and "kept" in str(answer["output"]["text"]), answer  # type: ignore[index]
    assert cache.is_dir() and list(cache.iterdir()) == []
    assert stat.S_IMODE(cache.stat().st_mode) & 0o077 == 0


def test_the_file_tools_agree_with_the_jobs_on_the_home(fresh: Home) -> None:
    session = fresh.session()
    code, answer = fresh.world.json_any("fs", "read", str(fresh.home / ".gitconfig"), "--session", session)
    assert code == 0 and "Home User" in str(answer), answer
    code, answer = fresh.world.json_any("fs", "read", str(fresh.home / ".ssh" / "id_ed25519"), "--session", session)
    assert code != 0 and answer["details"]["reason"] == "sandbox", answer
    code, answer = fresh.world.json_any(
        "fs", "write", str(fresh.home / "planted"), "--session", session, "--content", "x"
    )
    assert code != 0 and answer["details"]["reason"] == "sandbox", answer
    assert "outside the writable roots" in answer["message"], answer
    assert fresh.landed("planted") == []


def test_a_working_directory_inside_the_home_is_writable_and_the_rest_of_the_home_is_not(fresh: Home) -> None:
    work = fresh.home / "work"
    work.mkdir()
    session = fresh.session(work)
    inside = fresh.bash(session, "echo made > inside && cat ~/.gitconfig")
    assert inside["exit_code"] == 0 and "Home User" in str(inside["output"]["text"]), inside  # type: ignore[index]
    assert (work / "inside").read_text() == "made\n"
    outside = fresh.bash(session, "touch ../planted")
    assert outside["exit_code"] != 0 and "Read-only file system" in str(outside["output"]), outside
    assert fresh.landed("planted") == []


def readme_example() -> tuple[list[str], str]:
    """The README's sandbox example: the options its session is made with, and the command it says is refused."""
    text = README.read_text()
    create = re.search(r"^S2=\$\(uv run eukhe session create --cwd \. (.*)\)$", text, re.M)
    run = re.search(r"""^uv run eukhe bash --session "\$S2" -- '([^']*)'\s+# all refused$""", text, re.M)
    assert create is not None and run is not None, "the README's sandbox example changed: update this test"
    return shlex.split(create.group(1)), run.group(1)


def test_the_readme_sandbox_example_refuses_every_part(fresh: Home) -> None:
    """Each part of the example's command fails on its own (the key unread, `~/x` not made anywhere, the network
    cut), and the whole command as written leaves nothing behind."""
    options, command = readme_example()
    session = fresh.session(fresh.project, *options)
    for part in command.split(";"):
        answer = fresh.bash(session, part.strip())
        assert answer["exit_code"] != 0, (part, answer)
        assert SECRET not in str(answer["output"]), (part, answer)
    whole = fresh.bash(session, command)
    assert SECRET not in str(whole["output"]) and "HTTP/" not in str(whole["output"]), whole
    assert fresh.landed("x") == []
