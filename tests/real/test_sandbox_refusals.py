"""When the sandbox refused (docs/sandbox.md): a failed confined run whose failure the policy caused ends with one line
naming the rule and the way on, through the CLI (`eukhe bash`, `eukhe ipython`, `eukhe jobs wait`) and MCP; a failure
of its own (a file the test made unreadable, a missing file, a compiler, git) never does. Real bubblewrap, a real
daemon, real files."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.real.conftest import DaemonEnv
from tests.real.sandboxes import SANDBOX_PYTHON, wrapper
from tests.real.test_mcp_server import mcp_server, text_of
from tests.real.test_sandbox_escapes import git

pytestmark = pytest.mark.real

REFUSED = "sandbox refused ("


@dataclass
class Place:
    """A project (a git repository with one commit) and a home holding a key, outside the host's /tmp, as a user's
    are; sessions on it are made as a test asks."""

    world: DaemonEnv
    project: Path
    home: Path

    def session(self, *flags: str) -> str:
        made = self.world.json("session", "create", "--cwd", str(self.project), *flags)
        return str(made["id"])

    def bash(self, session: str, command: str, *flags: str) -> dict[str, Any]:
        code, answer = self.world.json_any("bash", "--session", session, *flags, "--", command)
        assert isinstance(answer, dict), (code, answer)
        return answer


@pytest.fixture
def place(world: DaemonEnv) -> Iterator[Place]:
    base = Path(tempfile.mkdtemp(prefix="eukhe-refusals-", dir="/var/tmp"))
    try:
        world.env["HOME"] = str(base / "home")
        project = base / "project"
        project.mkdir()
        (project / "README").write_text("hello\n")
        git(project, "init", "-q")
        git(project, "add", ".")
        git(project, "commit", "-qm", "first")
        home = base / "home"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "id_ed25519").write_text("key\n")
        yield Place(world, project, home)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def refusal(answer: dict[str, Any]) -> dict[str, Any] | None:
    assert answer["status"] == "settled", answer
    found = answer.get("refusal")
    assert found is None or isinstance(found, dict)
    return found


def refused_cases(place: Place) -> dict[str, tuple[str, str]]:
    """Each refused write or read: the command, and the rule its line must name."""
    world = place.world
    (world.root / "hostfile").write_text("the host's /tmp\n")
    return {
        "home": (f"touch {place.home}/x", "outside_writable_roots"),
        "etc": (f"echo x > /etc/eukhe-refusal-{world.root.name}", "outside_writable_roots"),
        "python": (f"python3 -c \"open('/usr/eukhe-refusal-{world.root.name}', 'w')\"", "outside_writable_roots"),
        "hooks": ("touch .git/hooks/pre-commit", "protected"),
        "claude": ("mkdir .claude/skills-x", "protected"),
        "pinned": ("mv .git g2", "pinned"),
        "key": (f"cat {place.home}/.ssh/id_ed25519", "deny_read"),
        "key_write": (f"touch {place.home}/.ssh/planted", "deny_read"),
        "hosts_tmp": (f"cat {world.root}/hostfile", "private_tmp"),
        "eukhe_own": (f"cat {world.agent_dir}/settings.json", "eukhe_dirs"),
    }


def test_each_refusal_of_a_confined_bash_run_names_its_rule_and_the_way_on(place: Place) -> None:
    session = place.session()
    for name, (command, rule) in refused_cases(place).items():
        answer = place.bash(session, command)
        assert answer["exit_code"] not in (0, None), (name, answer)
        found = refusal(answer)
        assert found is not None, (name, answer["output"]["text"])
        assert found["rule"] == rule, (name, found)
        assert found["hint"].startswith(f"{REFUSED}{rule}): "), found
        assert "instead" in found["hint"] or "do without it" in found["hint"]
    assert not (place.home / "x").exists()
    assert (place.project / ".git" / "HEAD").exists()


def test_the_same_failures_unconfined_or_of_their_own_say_nothing_of_the_sandbox(place: Place) -> None:
    """A failure the sandbox did not cause gets no line: the same messages in an unconfined session, a permission
    error on a file the job made unreadable, missing files, a failing compiler, git failing of itself, a message
    about a path the job may write, one far from the end of the output, and one in a run that did not fail."""
    session = place.session()
    (place.project / "bad.c").write_text("int main(void) { return x; }\n")
    own = {
        "unreadable": "echo hi > f && chmod 000 f && cat f",
        "missing": "cat nothere",
        "missing_tmp": f"cat /tmp/absent-{place.world.root.name}",
        "exit": "python3 -c 'raise SystemExit(3)'",
        "compile": "python3 -c \"compile('def (', 'bad.py', 'exec')\"",
        "git": "git checkout no-such-branch",
        "git_commit": "git commit -m nothing",
        "writable": "python3 -c \"raise OSError(30, 'Read-only file system', 'inside')\"",
        "far": "touch /usr/eukhe-far; seq 1 300; exit 1",
        "succeeded": f"touch {place.home}/x; true",
    }
    if shutil.which("gcc"):  # not one of the tools .ci/run installs: the Python compiler above stands for it
        own["gcc"] = "gcc -o /tmp/bad bad.c"
    for name, command in own.items():
        answer = place.bash(session, command)
        if name != "succeeded":
            assert answer["exit_code"] not in (0, None), (name, answer)
        assert refusal(answer) is None, (name, answer)
    unreadable = place.bash(session, "cat f")
    assert "Permission denied" in unreadable["output"]["text"]

    off = place.session("--sandbox", "off")
    victim = place.home / "unconfined"
    for command in ("python3 -c \"raise OSError(30, 'Read-only file system', '/usr/x')\"", "cat nothere"):
        answer = place.bash(off, command)
        assert answer["exit_code"] == 1
        assert refusal(answer) is None, answer
    assert refusal(place.bash(off, f"touch {victim}")) is None
    assert victim.exists(), "unconfined, the write the confined session refused is allowed"


def test_a_read_only_session_and_the_network_off_are_named(place: Place) -> None:
    read_only = place.session("--sandbox", "read_only")
    found = refusal(place.bash(read_only, "touch newfile"))
    assert found is not None and found["rule"] == "read_only"
    assert "--sandbox workspace_write" in found["hint"]

    offline = place.session("--network", "off")
    calls = {
        "resolve": "python3 -c \"import socket; socket.getaddrinfo('pypi.org', 443)\"",
        "route": "python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), timeout=20)\"",
    }
    for name, command in calls.items():
        found = refusal(place.bash(offline, command))
        assert found is not None, name
        assert found["rule"] == "network_off"
        assert "--network on" in found["hint"]
    alone = "echo 'ERROR: No matching distribution found for six' >&2; exit 1"  # pip's words with no network error
    assert refusal(place.bash(offline, alone)) is None
    assert refusal(place.bash(offline, "python3 -c \"open('nothere')\"")) is None

    online = place.session()
    unreachable = "python3 -c \"raise OSError(101, 'Network is unreachable')\""
    assert refusal(place.bash(online, unreachable)) is None, "with the network on, the sandbox did not cut it"


def test_git_config_of_the_repository_works_or_its_refusal_says_git_c(place: Place) -> None:
    """Where `.git/config` is protected, `git config` fails and its line shows how to pass config per command;
    where it is writable, it works and no line is there."""
    session = place.session()
    answer = place.bash(session, "git config user.email someone@eukhe.invalid")
    found = refusal(answer)
    if answer["exit_code"] == 0:
        assert found is None
    else:
        assert found is not None and found["rule"] == "protected", answer
        assert "git -c user.name=" in found["hint"]


def test_the_cli_prints_the_line_last_on_stderr(place: Place) -> None:
    world = place.world
    session = place.session()
    done = world.cli("bash", "--session", session, "--", f"touch {place.home}/x")
    assert done.returncode == 1
    assert "Read-only file system" in done.stdout
    assert done.stderr.splitlines()[-1].startswith(f"eukhe: {REFUSED}outside_writable_roots): ")
    done = world.cli("bash", "--session", session, "--", "cat nothere")
    assert done.returncode == 1
    assert REFUSED not in done.stderr

    go = place.project / "go"
    held = f"while [ ! -e {go} ]; do sleep 0.01; done; touch {place.home}/late"
    detached = place.bash(session, held, "--budget-ms", "100")
    assert detached["status"] == "detached"
    go.touch()
    waited = world.cli("jobs", "wait", "--session", session, detached["job"], timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert waited.stderr.splitlines()[-1].startswith(f"eukhe: {REFUSED}outside_writable_roots): "), waited.stderr
    again = world.json("jobs", "wait", "--session", session, detached["job"])
    assert again["refusal"]["rule"] == "outside_writable_roots"


def test_a_cell_that_writes_outside_the_workspace_says_so(place: Place) -> None:
    world = place.world
    session = place.session()
    outside = f"/usr/eukhe-cell-{world.root.name}"
    _, answer = world.json_any("ipython", "--session", session, "-c", f"open({outside!r}, 'w')")
    assert answer["outcome"] == "error", answer
    assert answer["refusal"]["rule"] == "outside_writable_roots", answer
    assert answer["refusal"]["path"] == outside
    done = world.cli("ipython", "--session", session, "-c", f"open({outside!r}, 'w')")
    assert done.stderr.splitlines()[-1].startswith(f"eukhe: {REFUSED}outside_writable_roots): "), done.stderr
    for own in ("open('nothere')", "1 / 0", "raise OSError(30, 'Read-only file system', 'inside')"):
        _, answer = world.json_any("ipython", "--session", session, "-c", own)
        assert answer["outcome"] == "error", answer
        assert answer["refusal"] is None, (own, answer)


def test_mcp_bash_and_ipython_end_with_the_line(place: Place) -> None:
    async def scenario() -> None:
        async with mcp_server(place.world, "--cwd", str(place.project)) as server:
            result = await server.call("bash", {"command": f"touch {place.home}/x"})
            assert not result.is_error
            last = text_of(result).splitlines()[-1]
            assert last.startswith(f"[{REFUSED}outside_writable_roots): ") and last.endswith("]"), last
            assert result.structured_content["refusal"]["rule"] == "outside_writable_roots"

            result = await server.call("bash", {"command": "cat nothere"})
            assert REFUSED not in text_of(result)
            assert text_of(result).endswith("[exit 1]")
            assert result.structured_content["refusal"] is None

            result = await server.call("ipython", {"code": f"open('{place.home}/.ssh/id_ed25519')"})
            last = text_of(result).splitlines()[-1]
            assert last.startswith(f"[{REFUSED}deny_read): "), text_of(result)
            assert result.structured_content["refusal"]["path"] == f"{place.home}/.ssh/id_ed25519"

            result = await server.call("ipython", {"code": "open('nothere')"})
            assert REFUSED not in text_of(result)

    anyio.run(scenario)


def test_a_cell_under_the_users_own_kernel_transport_gets_no_line(place: Place) -> None:
    """A user's `kernel_transport` is that user's confinement, not the policy's: its read-only root says nothing
    of the sandbox, while a bash run of the same session, which the policy confines, gets its line."""
    world = place.world
    with wrapper("bwrap", place.project.parent, place.project) as (setting, _):
        world.agent_dir.mkdir(parents=True, exist_ok=True)
        settings = {"kernel_transport": {**setting, "python": SANDBOX_PYTHON}}
        (world.agent_dir / "settings.json").write_text(json.dumps(settings))
        session = place.session()
        try:
            write = f"open('/usr/eukhe-transport-{world.root.name}', 'w')"
            args = ("ipython", "--session", session, "--budget-ms", "60000", "-c", write)
            _, answer = world.json_any(*args, timeout=120)
            assert answer["outcome"] == "error", answer
            assert "Read-only file system" in answer["error"]["evalue"], answer
            assert answer["refusal"] is None, answer
            found = refusal(place.bash(session, f'python3 -c "{write}"'))
            assert found is not None and found["rule"] == "outside_writable_roots"
        finally:
            world.json("session", "close", session, "--force")
