"""The escape battery (docs/sandbox.md): every attempt from a confined session fails and leaves the host unchanged,
and the same operation succeeds with `--sandbox off`, so that each test can fail. Real bubblewrap, a real daemon,
the CLI as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real

SECRET = "very-secret-key-material"
MODES = ("workspace_write", "off")


@dataclass
class Box:
    """A world with a project (a git repository with one commit), a home holding a key, and a session."""

    world: DaemonEnv
    project: Path
    home: Path
    outside: Path
    session: str
    confined: bool

    def bash(self, command: str) -> dict[str, object]:
        answer = self.world.json("bash", "--session", self.session, "--", command)
        assert isinstance(answer, dict)
        return answer

    def text(self, command: str) -> str:
        output = self.bash(command)["output"]
        assert isinstance(output, dict)
        return str(output["text"])


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=eukhe tests", "-c", "user.email=tests@eukhe.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_box(world: DaemonEnv, mode: str, base: Path) -> Box:
    """The box's files live in `base`, outside the host's /tmp (which no confined process sees at all), as a user's
    home and projects do: so each attempt meets the read-only root, the writable roots and the masks themselves."""
    world.env["HOME"] = str(base / "home")
    project = base / "project"
    (project / "sub").mkdir(parents=True)
    (project / "README").write_text("hello\n")
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "first")
    home = Path(world.env["HOME"])
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    outside = base / "outside.txt"
    outside.write_text("untouched\n")
    session = world.json("session", "create", "--cwd", str(project), "--sandbox", mode)["id"]
    return Box(world, project, home, outside, str(session), mode != "off")


@pytest.fixture(params=MODES)
def box(world: DaemonEnv, request: pytest.FixtureRequest) -> Iterator[Box]:
    base = Path(tempfile.mkdtemp(prefix="eukhe-box-", dir="/var/tmp"))
    try:
        yield make_box(world, request.param, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_session_show_names_the_policy_in_force(box: Box) -> None:
    shown = box.world.json("session", "show", box.session)
    assert shown["sandbox"]["mode"] == ("workspace_write" if box.confined else "off")
    text = box.world.cli("session", "show", box.session).stdout
    assert "sandbox: " in text


@pytest.mark.parametrize(
    "target",
    ["home", "etc", "usr_local", "parent", "symlink", "dotdot", "hardlink"],
)
def test_a_write_outside_the_roots_fails_and_leaves_the_host_unchanged(box: Box, target: str) -> None:
    victims = {
        "home": box.home / "pwned",
        "etc": Path("/etc") / f"eukhe-pwned-{box.world.root.name}",
        "usr_local": Path("/usr/local") / f"eukhe-pwned-{box.world.root.name}",
        "parent": box.project.parent / "pwned",
        "dotdot": box.project.parent / "pwned-dotdot",
    }
    commands = {
        "home": f"echo x > {victims['home']}",
        "etc": f"echo x > {victims['etc']}",
        "usr_local": f"echo x > {victims['usr_local']}",
        "parent": "echo x > ../pwned",
        "dotdot": "echo x > ./sub/../../pwned-dotdot",
        "symlink": f"ln -s {box.outside} link && echo pwned > link",
        "hardlink": f"ln {box.outside} hard && echo pwned >> hard",
    }
    try:
        box.bash(commands[target])
        if target in ("symlink", "hardlink"):
            changed = box.outside.read_text() != "untouched\n"
        else:
            changed = victims[target].exists()
        assert changed is not box.confined
    finally:
        for victim in victims.values():
            victim.unlink(missing_ok=True)


def test_a_deny_read_key_is_unreadable_from_bash_a_cell_and_every_file_tool(box: Box) -> None:
    key = box.home / ".ssh" / "id_ed25519"
    assert (SECRET in box.text(f"cat {key}")) is not box.confined
    cell = box.world.json("ipython", "--session", box.session, "-c", f"print(open({str(key)!r}).read())")
    assert (SECRET in json.dumps(cell)) is not box.confined
    for tool in (["read", str(key)], ["grep", SECRET, str(key.parent)], ["glob", "*", str(key.parent)]):
        code, answer = box.world.json_any("fs", *tool, "--session", box.session)
        if box.confined:
            assert code != 0 and answer.get("details", {}).get("reason") == "sandbox", (tool, answer)
            assert str(key.parent) in answer["message"]
        else:
            assert code == 0, (tool, answer)
    patch = box.project / "key.patch"
    patch.write_text(f"*** Begin Patch\n*** Update File: {key}\n@@\n-{SECRET}\n+edited\n*** End Patch\n")
    code, answer = box.world.json_any("fs", "edit", "--session", box.session, str(patch))
    assert (code != 0) is box.confined, answer
    assert key.read_text() == (SECRET if box.confined else "edited")
    code, answer = box.world.json_any("fs", "write", str(key), "--session", box.session, "--content", "x")
    assert (code != 0) is box.confined
    assert key.read_text() == (SECRET if box.confined else "x")


def test_git_hooks_are_protected_and_a_config_key_that_runs_code_is_undone_while_git_works(box: Box) -> None:
    """A hook cannot be planted; `git config core.hooksPath` works but is undone and named in the answer, and so is
    a program key a file tool writes into the config (the config is writable, the guard audits it); `git add` and
    `git commit` work."""
    hook = box.project / ".git" / "hooks" / "pre-commit"
    box.bash(f"echo 'touch {box.world.root}/hooked' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit")
    assert hook.exists() is not box.confined
    answer = box.bash("git config core.hooksPath /tmp && git config user.name Job")
    assert answer["exit_code"] == 0, answer
    assert ("core.hookspath" in configured_keys(box.project)) is not box.confined
    assert ("core.hookspath" in " ".join(map(str, answer.get("notices", [])))) is box.confined, answer  # type: ignore[call-overload]
    assert "user.name" in configured_keys(box.project)
    answer = box.bash(
        "echo more >> README && git add README && "
        "git -c user.name=t -c user.email=t@t.invalid -c core.hooksPath=.git/hooks commit -qm second && "
        "git log --oneline | wc -l"
    )
    assert answer["exit_code"] == 0, answer
    assert str(answer["output"]["text"]).strip().endswith("2")  # type: ignore[index]
    code, refusal = box.world.json_any("fs", "write", str(hook), "--session", box.session, "--content", "x")
    assert (code != 0) is box.confined
    if box.confined:
        assert refusal["details"]["reason"] == "sandbox" and "protected" in refusal["message"]
    marker = box.project.parent / "ran-fs-config"
    config = box.project / ".git" / "config"
    planted = config.read_text() + f"[core]\n\tfsmonitor = touch {marker}; false\n"
    code, answer = box.world.json_any("fs", "write", str(config), "--session", box.session, "--content", planted)
    assert code == 0, answer
    later = box.bash("true")
    assert ("core.fsmonitor" in " ".join(map(str, later.get("notices", [])))) is box.confined, later  # type: ignore[call-overload]
    subprocess.run(["git", "status"], cwd=box.project, capture_output=True, check=False)
    assert marker.exists() is not box.confined


def configured_keys(repo: Path) -> list[str]:
    """The keys of a repository's own config, as git reads them."""
    listed = subprocess.run(
        ["git", "config", "--file", ".git/config", "--list", "--name-only"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def test_a_git_init_in_a_new_directory_works_and_its_hooks_are_protected_from_the_next_job_on(box: Box) -> None:
    fresh = box.project / "fresh"
    fresh.mkdir()
    session = box.world.json("session", "create", "--cwd", str(fresh), "--sandbox", "workspace_write")["id"]
    first = box.world.json("bash", "--session", session, "--", "git init -q && echo ok")
    assert first["exit_code"] == 0
    later = box.world.json("bash", "--session", session, "--", "echo x > .git/hooks/pre-commit")
    assert later["exit_code"] != 0
    assert not (fresh / ".git" / "hooks" / "pre-commit").exists()


def test_the_projects_eukhe_settings_cannot_be_written(box: Box) -> None:
    (box.project / ".eukhe").mkdir()
    settings = box.project / ".eukhe" / "settings.json"
    settings.write_text("{}")
    box.bash("""echo '{"sandbox": {"mode": "off"}}' > .eukhe/settings.json""")
    assert (settings.read_text() == "{}") is box.confined
    code, _ = box.world.json_any("fs", "write", str(settings), "--session", box.session, "--content", "{}")
    assert (code != 0) is box.confined


def test_the_daemons_socket_is_out_of_reach_and_eukhe_bash_inside_runs_nothing_on_the_host(box: Box) -> None:
    sock = box.world.socket
    probe = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(sock)!r}); print('connected')"
    assert ("connected" in box.text(f"python3 -c {shlex_quote(probe)}")) is not box.confined
    marker = box.project.parent / "from-inside"
    inner = f"{sys.executable} -m eukhe.cli.main bash --session {box.session} -- 'touch {marker}'"
    if box.confined:  # eukhe itself must be there to try: its tree and venv (under /tmp in a CI clone) made visible
        probe_box = make_confined_with_eukhe(box)
        answer = box.world.json("bash", "--session", probe_box, "--", inner)
        assert "No such file" not in str(answer["output"]["text"]), answer  # eukhe ran, and found no daemon
        assert answer["exit_code"] != 0, answer
    box.bash(inner)
    assert marker.exists() is not box.confined


def make_confined_with_eukhe(box: Box) -> str:
    """A confined session whose writable roots hold eukhe's tree and interpreter, so a command can run eukhe."""
    tree = Path(__file__).resolve().parents[2]
    venv = Path(sys.prefix)
    settings = {"sandbox": {"writable_roots": sorted({str(tree), str(venv)})}}
    (box.world.agent_dir / "settings.json").write_text(json.dumps(settings))
    return str(box.world.json("session", "create", "--cwd", str(box.project))["id"])


def test_a_host_process_cannot_be_seen_or_signalled(box: Box) -> None:
    pid = os.getpid()
    seen = box.text(f"test -e /proc/{pid}/status && echo seen; kill -0 {pid} 2>/dev/null && echo signalled")
    assert ("seen" in seen) is not box.confined
    assert ("signalled" in seen) is not box.confined


@pytest.fixture
def listener() -> Iterator[tuple[int, int, list[bytes]]]:
    """A TCP listener and a UDP socket on 127.0.0.1 and what reached them."""
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        tcp.settimeout(0.2)
        udp.settimeout(0.2)
        while not stop.is_set():
            for sock in (tcp, udp):
                try:
                    if sock is tcp:
                        connection, _ = tcp.accept()
                        got.append(b"tcp")
                        connection.close()
                    else:
                        got.append(udp.recv(64))
                except OSError:
                    continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield tcp.getsockname()[1], udp.getsockname()[1], got
    finally:
        stop.set()
        thread.join()
        tcp.close()
        udp.close()


@pytest.mark.parametrize("network", ["off", "on"])
def test_the_network_off_cuts_tcp_dev_tcp_and_udp_and_on_lets_them_through(
    world: DaemonEnv, listener: tuple[int, int, list[bytes]], network: str
) -> None:
    tcp_port, udp_port, got = listener
    project = world.root / "net"
    project.mkdir()
    session = world.json("session", "create", "--cwd", str(project), "--network", network)["id"]
    connect = f"import socket; socket.create_connection(('127.0.0.1', {tcp_port}), timeout=5); print('tcp ok')"
    udp = f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'udp', ('127.0.0.1', {udp_port}))"
    commands = [
        f"python3 -c {shlex_quote(connect)}",
        f"exec 3<>/dev/tcp/127.0.0.1/{tcp_port} && echo devtcp ok",
        f"python3 -c {shlex_quote(udp)}; echo sent",
    ]
    texts = [str(world.json("bash", "--session", session, "--", c)["output"]["text"]) for c in commands]
    assert ("tcp ok" in texts[0]) is (network == "on"), texts
    assert ("devtcp ok" in texts[1]) is (network == "on"), texts
    if network == "on":
        deadline_wait(lambda: got.count(b"tcp") >= 2 and b"udp" in got)
    else:
        assert got == []


def test_an_isolated_child_cannot_write_its_parents_directory_by_absolute_path(box: Box) -> None:
    target = box.project / "written-by-child"
    code = f"open({str(target)!r}, 'w').write('child')"
    box.world.json("spawn", "--session", box.session, "--name", "kid", "--isolated", "-c", code)
    reports = box.world.json("children", "collect", "--session", box.session, "kid")
    assert reports
    assert target.exists() is not box.confined


def test_a_project_settings_file_that_loosens_the_policy_is_refused_by_name(world: DaemonEnv) -> None:
    project = world.root / "loose"
    (project / ".eukhe").mkdir(parents=True)
    (project / ".eukhe" / "settings.json").write_text(json.dumps({"sandbox": {"mode": "off", "writable_roots": ["/"]}}))
    done = world.cli("session", "create", "--cwd", str(project))
    assert done.returncode == 0, done.stderr
    session = done.stdout.strip()
    said = [line for line in done.stderr.splitlines() if "would loosen the sandbox" in line]
    assert len(said) == 2 and all(str(project / ".eukhe" / "settings.json") in line for line in said), done.stderr
    assert "sandbox.mode" in said[0] + said[1] and "sandbox.writable_roots" in said[0] + said[1]
    again = world.json("session", "create", "--cwd", str(project))
    assert len(again["notices"]) == 2, "the create answer carries the notices"
    shown = world.json("session", "show", session)
    assert shown["sandbox"]["mode"] == "workspace_write"
    notices = json.dumps(shown["entries"])
    assert "sandbox.mode" in notices and "sandbox.writable_roots" in notices
    assert str(project / ".eukhe" / "settings.json") in notices
    world.json("bash", "--session", session, "--", f"echo x > {world.root}/loose-out")
    assert not (world.root / "loose-out").exists()


def test_a_stricter_project_policy_tightens_the_session(world: DaemonEnv) -> None:
    project = world.root / "strict"
    (project / ".eukhe").mkdir(parents=True)
    (project / ".eukhe" / "settings.json").write_text(json.dumps({"sandbox": {"mode": "read_only"}}))
    session = world.json("session", "create", "--cwd", str(project))["id"]
    assert world.json("session", "show", session)["sandbox"]["mode"] == "read_only"
    read = world.json("bash", "--session", session, "--", "cat .eukhe/settings.json")
    assert read["exit_code"] == 0 and "read_only" in read["output"]["text"], read  # the cwd shows, read-only
    wrote = world.json("bash", "--session", session, "--", "echo x > inside")
    assert wrote["exit_code"] != 0 and "Read-only file system" in wrote["output"]["text"], wrote
    assert not (project / "inside").exists()


def test_under_the_default_policy_a_venv_in_the_cwd_installs_a_local_wheel_and_a_cell_works(world: DaemonEnv) -> None:
    project = world.root / "venvproj"
    project.mkdir()
    wheel = tiny_wheel(project)
    session = world.json("session", "create", "--cwd", str(project))["id"]
    answer = world.json(
        "bash",
        "--session",
        session,
        "--budget-ms",
        "240000",
        "--",
        f"python3 -m venv .venv && .venv/bin/pip install -q --no-index --no-deps {wheel.name} && "
        ".venv/bin/python -c 'import eukhe_tiny; print(eukhe_tiny.X)'",
    )
    assert answer["exit_code"] == 0, answer["output"]
    assert "42" in str(answer["output"]["text"])
    assert world.json("ipython", "--session", session, "-c", "6 * 7")["result"] == "42"


def tiny_wheel(directory: Path) -> Path:
    """A pure-Python wheel with one module, written by hand (nothing to download)."""
    path = directory / "eukhe_tiny-0.1-py3-none-any.whl"
    files = {
        "eukhe_tiny.py": "X = 42\n",
        "eukhe_tiny-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: eukhe-tiny\nVersion: 0.1\n",
        "eukhe_tiny-0.1.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{name},,\n" for name in files) + "eukhe_tiny-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr("eukhe_tiny-0.1.dist-info/RECORD", record)
    return path


def test_a_bwrap_that_fails_its_probe_refuses_the_session_with_sandbox_unavailable(world: DaemonEnv) -> None:
    fake = world.root / "fakebin"
    fake.mkdir()
    bwrap = fake / "bwrap"
    bwrap.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    bwrap.chmod(bwrap.stat().st_mode | stat.S_IXUSR)
    world.env["PATH"] = f"{fake}:{world.env['PATH']}"
    world.env["EUKHE_BWRAP"] = str(bwrap)  # the only one probed: the bundled one is not tried
    project = world.root / "closed"
    project.mkdir()
    code, error = world.json_error("session", "create", "--cwd", str(project))
    assert code != 0
    assert error["error"] == "sandbox_unavailable", error
    assert "--sandbox off" in error["message"] and "namespace" in error["message"]
    assert world.json("session", "list")["sessions"] == []  # nothing was made
    off = world.json("session", "create", "--cwd", str(project), "--sandbox", "off")["id"]
    assert world.json("bash", "--session", off, "--", "echo runs")["exit_code"] == 0


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def deadline_wait(condition: object, seconds: float = 20.0) -> None:
    """Wait for a real event: the listener's thread recording what reached it."""
    import time

    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "nothing reached the listener"
        time.sleep(0.02)


@pytest.fixture
def outside_socket() -> Iterator[Path]:
    """A Unix socket listening outside /tmp and outside every writable root (like docker.sock or an ssh agent)."""
    directory = Path(tempfile.mkdtemp(prefix="eukhe-sock-", dir="/var/tmp"))
    path = directory / "service.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    try:
        yield path
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_a_unix_socket_outside_the_roots_is_masked_unless_its_directory_is_a_writable_root(
    world: DaemonEnv, outside_socket: Path
) -> None:
    project = world.root / "sockets"
    project.mkdir()
    probe = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(outside_socket)!r}); print('connected')"
    command = f"python3 -c {shlex_quote(probe)}"
    confined = world.json("session", "create", "--cwd", str(project))["id"]
    assert "connected" not in str(world.json("bash", "--session", confined, "--", command)["output"]["text"])
    world.agent_dir.mkdir(parents=True, exist_ok=True)
    settings = {"sandbox": {"writable_roots": [str(outside_socket.parent)]}}
    (world.agent_dir / "settings.json").write_text(json.dumps(settings))
    allowed = world.json("session", "create", "--cwd", str(project))["id"]
    assert world.json("session", "show", allowed)["sandbox"]["writable_roots"] == [str(outside_socket.parent)]
    assert "connected" in str(world.json("bash", "--session", allowed, "--", command)["output"]["text"])


def test_a_network_off_policy_with_a_users_kernel_transport_is_refused_as_a_conflict(world: DaemonEnv) -> None:
    world.agent_dir.mkdir(parents=True, exist_ok=True)
    transport = {"argv_prefix": ["setsid", "-w", "sh", "-c", 'exec "$@"', "wrapper"], "path_map": []}
    (world.agent_dir / "settings.json").write_text(json.dumps({"kernel_transport": transport}))
    project = world.root / "conflict"
    project.mkdir()
    code, error = world.json_error("session", "create", "--cwd", str(project), "--network", "off")
    assert code != 0
    assert error["error"] == "sandbox_conflict", error
    assert "kernel_transport" in error["message"] and "network" in error["message"]
    assert world.json("session", "create", "--cwd", str(project))["id"]  # network on: the transport runs as it is


@pytest.mark.parametrize("spelling", ["symlink", "dotdot"])
def test_a_file_tool_write_through_a_symlink_or_dotdot_is_refused_and_leaves_the_host_unchanged(
    box: Box, spelling: str
) -> None:
    (box.project / "out").symlink_to(box.outside.parent)
    path = {"symlink": "out/outside.txt", "dotdot": "sub/../../outside.txt"}[spelling]
    code, answer = box.world.json_any(
        "fs", "write", str(box.project / path), "--session", box.session, "--content", "x"
    )
    assert (code != 0) is box.confined, answer
    if box.confined:
        assert answer["details"]["reason"] == "sandbox", answer
        assert str(box.outside) in answer["message"], answer  # the resolved path, the one the rule is about
    assert (box.outside.read_text() == "untouched\n") is box.confined
