"""git works in a confined job: `git config` of keys that run no code, `git remote add`, `git branch -m` and
`git push -u` write the repository's config; each key that would make the user's git run a program or read another
file is unset by the git guard, the answer names it, and the user's next git command outside eukhe runs nothing the
job planted. The user's own entries, program keys included, stay. A config the guard cannot read as git does (a
link, a hard link, a huge file, broken syntax) is put back. Real bubblewrap, real git, a real daemon, the CLI; the
home under /var/tmp and under /tmp."""

from __future__ import annotations

import contextlib
import os
import pty
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv, make_env
from tests.real.test_sandbox_escapes import git
from tests.real.tools import missing_reason

pytestmark = [pytest.mark.real, pytest.mark.skipif(bool(missing_reason("bwrap", "git")), reason="bwrap, git")]

HOME_BASES = ("/var/tmp", "/tmp")
USERS_PAGER = "less -R"
"""A program key the user set before the session: it stays."""


@dataclass(frozen=True)
class Refused:
    """A key a job sets, its value (`{m}`: the marker the program would make; `{cfg}`: a config file the job wrote,
    which would make it; `{script}`: a script the job wrote, which would make it, for a key git runs as a program
    rather than through the shell), and the user's git command that would run it."""

    key: str
    value: str
    trigger: tuple[str, ...]
    stdin: bytes = b""


CREDENTIAL_ASK = b"protocol=https\nhost=example.invalid\n\n"
IDENTITY = ("-c", "user.name=u", "-c", "user.email=u@eukhe.invalid")
REFUSED = [
    Refused("core.hooksPath", "{hooks}", (*IDENTITY, "commit", "-q", "--allow-empty", "-m", "hooked")),
    Refused("core.fsmonitor", "touch {m}; false", ("status",)),
    Refused("core.sshCommand", "touch {m}; false", ("ls-remote", "ssh://example.invalid/x")),
    Refused("core.editor", "touch {m}; true", (*IDENTITY, "commit", "--allow-empty")),
    Refused("core.pager", "touch {m}; cat", ("-p", "log")),
    Refused("core.askPass", "{script}", ("credential", "fill"), CREDENTIAL_ASK),
    Refused("sequence.editor", "touch {m}; true", (*IDENTITY, "rebase", "-q", "-i", "--autostash", "--root")),
    Refused("diff.external", "touch {m}; true", ("diff", "--ext-diff")),
    Refused("diff.tc.textconv", "touch {m}; cat", ("cat-file", "--textconv", "HEAD:README")),
    Refused("filter.fl.clean", "touch {m}; cat", ("hash-object", "README")),
    Refused("filter.fl.smudge", "touch {m}; cat", ("cat-file", "--filters", "HEAD:README")),
    Refused("merge.md.driver", "touch {m}; false", ("merge-tree", "--write-tree", "left", "right")),
    Refused("credential.helper", "!touch {m}; true", ("credential", "fill"), CREDENTIAL_ASK),
    Refused("gpg.program", "{script}", (*IDENTITY, "commit", "-q", "--allow-empty", "-S", "-m", "signed")),
    Refused("alias.pl", "!touch {m}", ("pl",)),
    Refused("include.path", "{cfg}", ("status",)),
    Refused("includeIf.gitdir:/.path", "{cfg}", ("status",)),
]
ALLOWED = {
    "user.name": "Job Name",
    "user.email": "job@eukhe.invalid",
    "remote.origin.url": "/tmp/remote.git",
    "branch.trunk.remote": "origin",
    "branch.trunk.merge": "refs/heads/trunk",
    "init.defaultbranch": "trunk",
    "pull.rebase": "true",
    "push.default": "current",
}
ALLOWED_JOB = (
    "git config user.name 'Job Name' && git config user.email job@eukhe.invalid && "
    "git init -q --bare /tmp/remote.git && git remote add origin /tmp/remote.git && "
    "git branch -m trunk && git push -q -u origin trunk && "
    "git config init.defaultBranch trunk && git config pull.rebase true && git config push.default current"
)


def slug(key: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in key.lower())


def users_git(repo: Path, *args: str, stdin: bytes = b"") -> None:
    """The user's git outside eukhe, on a terminal (so that a pager or an editor would run), with nothing in the
    environment that would take the place of a config key (GIT_EDITOR, GIT_PAGER, ...), only what git falls back to
    when the key is not set (EDITOR, PAGER: programs that return at once); its outcome does not matter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_EDITOR", "GIT_PAGER", "GIT_SEQUENCE"))}
    env = {k: v for k, v in env.items() if not k.startswith(("GIT_SSH", "GIT_ASKPASS", "SSH_ASKPASS", "VISUAL"))}
    env.update(TERM="xterm", GIT_TERMINAL_PROMPT="0", EDITOR="true", PAGER="cat", HOME=str(repo.parent / "home"))
    main, side = pty.openpty()
    try:
        subprocess.run(
            ["git", *args], cwd=repo, env=env, input=stdin, stdout=side, stderr=side, timeout=60, check=False
        )
    finally:
        os.close(side)
        with contextlib.suppress(OSError):
            while os.read(main, 65536):
                pass
        os.close(main)


def local_config(repo: Path) -> list[tuple[str, str]]:
    """The repository's own config entries as git reads them (keys canonical)."""
    listed = subprocess.run(
        ["git", "config", "--file", str(repo / ".git" / "config"), "--list", "-z"],
        capture_output=True,
        check=True,
    ).stdout
    return [tuple(entry.decode().split("\n", 1)) for entry in listed.split(b"\0") if entry]  # type: ignore[misc]


def canonical(key: str) -> str:
    section, _, rest = key.partition(".")
    sub, dot, name = rest.rpartition(".")
    return f"{section.lower()}.{sub}.{name.lower()}" if dot else key.lower()


@dataclass
class Repo:
    """A confined session on a repository with two branches that conflict (for a merge driver), the user's own
    program key in its config, and what a job that set every refused key answered."""

    world: DaemonEnv
    base: Path
    project: Path
    session: str
    refused_answer: dict[str, object] = field(default_factory=dict)
    allowed_answer: dict[str, object] = field(default_factory=dict)

    def bash(self, command: str) -> dict[str, object]:
        answer = self.world.json("bash", "--session", self.session, "--", command)
        assert isinstance(answer, dict)
        return answer

    def marker(self, key: str) -> Path:
        return self.base / f"ran-{slug(key)}"


def make_repo(world: DaemonEnv, base: Path) -> Repo:
    home = base / "home"
    home.mkdir()
    world.env["HOME"] = str(home)
    project = base / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    (project / "README").write_text("base\n")
    git(project, "add", ".")
    git(project, "commit", "-qm", "first")
    for branch, text in (("left", "left\n"), ("right", "right\n")):
        git(project, "checkout", "-q", "-b", branch, "main")
        (project / "README").write_text(text)
        git(project, "commit", "-qam", branch)
    git(project, "checkout", "-q", "main")
    git(project, "config", "core.pager", USERS_PAGER)
    session = str(world.json("session", "create", "--cwd", str(project))["id"])
    return Repo(world, base, project, session)


@pytest.fixture(scope="module", params=HOME_BASES)
def repo(request: pytest.FixtureRequest) -> Iterator[Repo]:
    """One world per home place, shared by the checks of each key: one job sets every refused key, one answer's
    audit undoes them all, and each key is then checked on its own."""
    root = Path(tempfile.mkdtemp(prefix="ek", dir="/tmp"))
    base = Path(tempfile.mkdtemp(prefix="eukhe-git-", dir=request.param))
    world = make_env(root)
    try:
        made = make_repo(world, base)
        hooks = made.project / "planted-hooks"
        settings = [  # core.pager is the user's already: the job's is one more value
            f"git config {'--add ' if r.key == 'core.pager' else ''}{r.key} {shlex.quote(fill(r, made))}"
            for r in REFUSED
        ]
        plants = (
            f"mkdir -p {hooks} && printf '#!/bin/sh\\ntouch {made.marker('core.hooksPath')}\\n' > {hooks}/pre-commit"
            f" && chmod +x {hooks}/pre-commit && printf 'README diff=tc filter=fl merge=md\\n' > .gitattributes"
            + "".join(
                f" && printf '[core]\\n\\tfsmonitor = touch {made.marker(r.key)}; false\\n' > {slug(r.key)}.cfg"
                for r in REFUSED
                if "{cfg}" in r.value
            )
            + "".join(
                f" && printf '#!/bin/sh\\ntouch {made.marker(r.key)}\\necho x\\n' > planted-{slug(r.key)}"
                f" && chmod +x planted-{slug(r.key)}"
                for r in REFUSED
                if "{script}" in r.value
            )
        )
        made.refused_answer = made.bash(" && ".join([plants, *settings]))
        (made.project / "README").write_text("changed on the host\n")  # a diff for the diff drivers to run on
        made.allowed_answer = made.bash(ALLOWED_JOB)
        yield made
    finally:
        left = world.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
        assert not left, f"processes outlived the daemon stop: {left}"


def fill(refused: Refused, repo: Repo) -> str:
    """The value the job sets for a refused key."""
    config = repo.project / f"{slug(refused.key)}.cfg"
    script = repo.project / f"planted-{slug(refused.key)}"
    return refused.value.format(
        m=repo.marker(refused.key), cfg=config, script=script, hooks=repo.project / "planted-hooks"
    )


@pytest.mark.parametrize("refused", REFUSED, ids=[r.key for r in REFUSED])
def test_a_key_that_runs_code_is_undone_named_and_runs_nothing_for_the_user(repo: Repo, refused: Refused) -> None:
    assert repo.refused_answer["exit_code"] == 0, repo.refused_answer  # each `git config` worked
    notices = " ".join(map(str, repo.refused_answer.get("notices", []))).lower()  # type: ignore[call-overload]
    assert f"removed {canonical(refused.key)} from {repo.project / '.git' / 'config'}".lower() in notices, notices
    assert (canonical(refused.key), fill(refused, repo)) not in local_config(repo.project)
    users_git(repo.project, *refused.trigger, stdin=refused.stdin)
    users_git(repo.project, "status")
    assert not repo.marker(refused.key).exists(), f"the user's git ran what {refused.key} named"


def test_the_users_own_program_key_stays(repo: Repo) -> None:
    assert ("core.pager", USERS_PAGER) in local_config(repo.project)
    assert [value for key, value in local_config(repo.project) if key == "core.pager"] == [USERS_PAGER]


@pytest.mark.parametrize("key", sorted(ALLOWED))
def test_a_key_that_runs_no_code_is_written_by_git_in_a_confined_job(repo: Repo, key: str) -> None:
    assert repo.allowed_answer["exit_code"] == 0, repo.allowed_answer
    assert not repo.allowed_answer.get("notices"), repo.allowed_answer
    assert (key, ALLOWED[key]) in local_config(repo.project)


def test_git_branch_m_renamed_the_branch_and_push_u_reached_the_remote(repo: Repo) -> None:
    head = subprocess.run(["git", "symbolic-ref", "HEAD"], cwd=repo.project, capture_output=True, text=True, check=True)
    assert head.stdout.strip() == "refs/heads/trunk"
    pushed = repo.bash("git ls-remote /tmp/remote.git")
    assert "refs/heads/trunk" in str(pushed["output"]), pushed


@pytest.fixture
def fresh_repo(world: DaemonEnv) -> Iterator[Repo]:
    base = Path(tempfile.mkdtemp(prefix="eukhe-git-", dir="/var/tmp"))
    try:
        yield make_repo(world, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


PLANTED = "[core]\\n\\tfsmonitor = touch {m}; false\\n"
UNREADABLE = {
    "link": "printf '" + PLANTED + "' > evil.cfg && ln -sf ../evil.cfg .git/config",
    "huge": "head -c 2000000 /dev/zero | tr '\\0' '#' >> .git/config && printf '\\n" + PLANTED + "' >> .git/config",
    "syntax": "printf '[core\\n" + PLANTED + "' >> .git/config",
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_config_the_guard_cannot_read_as_git_does_is_put_back(fresh_repo: Repo, case: str) -> None:
    """A link (git would follow it to a file the job keeps writing, past the watch), a file over the audit's cap,
    or broken syntax: the config is put back as it was before the session, and the answer says so."""
    config = fresh_repo.project / ".git" / "config"
    before = config.read_bytes()
    marker = fresh_repo.marker(case)
    answer = fresh_repo.bash(UNREADABLE[case].format(m=marker))
    assert answer["exit_code"] == 0, answer
    assert not config.is_symlink() and config.read_bytes() == before
    assert f"put {config} back" in " ".join(map(str, answer.get("notices", []))), answer  # type: ignore[call-overload]
    users_git(fresh_repo.project, "status")
    assert not marker.exists()


def test_a_hard_link_to_the_config_is_broken_so_no_other_name_writes_it(fresh_repo: Repo) -> None:
    """A write through another name of the config is not a change the watch of the git directory hears: the audit
    replaces a linked config by a copy, so that the other name is just a file."""
    config = fresh_repo.project / ".git" / "config"
    answer = fresh_repo.bash("ln .git/config .git/linked")
    assert answer["exit_code"] == 0, answer
    assert config.stat().st_nlink == 1
    assert "by a copy" in " ".join(map(str, answer.get("notices", []))), answer  # type: ignore[call-overload]
    marker = fresh_repo.marker("hard-link")
    fresh_repo.bash(f"printf '{PLANTED.format(m=marker)}' >> .git/linked")
    assert "core.fsmonitor" not in [key for key, _ in local_config(fresh_repo.project)]
    users_git(fresh_repo.project, "status")
    assert not marker.exists()


def test_the_baseline_is_the_sessions_and_survives_a_daemon_restart(fresh_repo: Repo) -> None:
    """The baseline is taken at the session's first confined launch and kept in its directory: a key that appears
    while the daemon is down is not the user's from before the session, and the reopened session undoes it."""
    fresh_repo.bash("true")
    fresh_repo.world.cli("daemon", "stop")
    marker = fresh_repo.marker("restart")
    git(fresh_repo.project, "config", "core.fsmonitor", f"touch {marker}; false")
    answer = fresh_repo.bash("git config user.name After")
    assert "core.fsmonitor" in " ".join(map(str, answer.get("notices", []))), answer  # type: ignore[call-overload]
    assert ("core.pager", USERS_PAGER) in local_config(fresh_repo.project)
    users_git(fresh_repo.project, "status")
    assert not marker.exists()
