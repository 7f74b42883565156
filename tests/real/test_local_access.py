"""Local access on real paths, sockets and processes ("Local access" 1-4): socket dir, cwd, modes, a second user."""

from __future__ import annotations

import json
import os
import pwd
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from eukhe.daemon.local_access import (
    SocketBindError,
    SocketDirError,
    bind_private_socket,
    ensure_socket_dir,
    peer_uid,
)
from eukhe.private_fs import WorkingDirError, check_working_dir
from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real

OTHER_UID = 54321


def unused_uid() -> int:
    uid = OTHER_UID
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# Each case makes a path under `base` and names the socket-dir outcome (None: used) and the cwd outcome (None: opens).
def _missing(base: Path) -> Path:
    return base / "missing" / "deeper"


def _dir(mode: int) -> Callable[[Path], Path]:
    def make(base: Path) -> Path:
        path = base / f"d{mode:o}"
        path.mkdir()
        os.chmod(path, mode)
        return path

    return make


def _symlink(base: Path) -> Path:
    target = base / "target"
    target.mkdir(mode=0o700)
    (base / "link").symlink_to(target)
    return base / "link"


def _file(base: Path) -> Path:
    path = base / "file"
    path.write_text("x")
    return path


def _root(base: Path) -> Path:
    return Path("/")


def _other_owner(base: Path) -> Path:
    path = base / "theirs"
    path.mkdir(mode=0o700)
    os.chown(path, OTHER_UID, OTHER_UID)
    return path


CASES: list[tuple[str, Callable[[Path], Path], str | None, str | None]] = [
    ("missing", _missing, None, "working directory is gone"),
    ("0755", _dir(0o755), None, None),
    ("0750", _dir(0o750), None, None),
    ("0705", _dir(0o705), None, None),
    ("0720", _dir(0o720), "mode", None),  # group write alone
    ("0702", _dir(0o702), "mode", None),  # other write alone
    ("0777", _dir(0o777), "mode", None),
    ("symlink", _symlink, "symlink", None),
    ("file", _file, "not_dir", "working directory is not a directory"),
    ("root", _root, None if os.getuid() == 0 else "owner", None),
    ("other_owner", _other_owner, "owner", None),
]


@pytest.mark.parametrize(("name", "make", "fault", "cwd_text"), CASES, ids=[c[0] for c in CASES])
def test_socket_dir_check_on_real_paths(
    tmp_path: Path, name: str, make: Callable[[Path], Path], fault: str | None, cwd_text: str | None
) -> None:
    path = make(tmp_path)
    if fault is None:
        assert ensure_socket_dir(path) == path
        if name == "missing":
            # Created 0700 in one step, and its missing parent too.
            assert mode_of(path) == 0o700
            assert mode_of(path.parent) == 0o700
        return
    with pytest.raises(SocketDirError) as caught:
        ensure_socket_dir(path)
    error = caught.value
    assert error.fault == fault
    message = str(error)
    assert str(path) in message, "the error names the directory"
    assert "--daemon-socket" in message, "the error names the fix"
    if fault in ("symlink", "not_dir"):
        assert "remove the path" in message
    if fault == "mode":
        assert f"chmod go-w {path}" in message
        assert f"has mode {mode_of(path):04o}" in message
    if fault == "owner":
        assert f"uid {OTHER_UID}" in message


def test_socket_dir_check_of_root_for_another_daemon_uid() -> None:
    """`/` belongs to root: a daemon of any other uid refuses it."""
    with pytest.raises(SocketDirError) as caught:
        ensure_socket_dir(Path("/"), daemon_uid=OTHER_UID)
    assert caught.value.fault == "owner"


@pytest.mark.parametrize(("name", "make", "fault", "cwd_text"), CASES, ids=[c[0] for c in CASES])
def test_cwd_check_on_real_paths(
    tmp_path: Path, name: str, make: Callable[[Path], Path], fault: str | None, cwd_text: str | None
) -> None:
    path = make(tmp_path)
    if cwd_text is None:
        assert check_working_dir(path) == Path(os.path.abspath(path))
        return
    with pytest.raises(WorkingDirError) as caught:
        check_working_dir(path)
    assert str(caught.value) == cwd_text


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "a session needs a working directory"), ("", "a session needs a working directory")],
    ids=["none", "empty"],
)
def test_cwd_check_none_and_empty(value: str | None, text: str) -> None:
    with pytest.raises(WorkingDirError) as caught:
        check_working_dir(value)
    assert str(caught.value) == text


def test_cwd_check_a_dir_opens(tmp_path: Path) -> None:
    assert check_working_dir(tmp_path) == tmp_path


def test_bind_makes_the_socket_0600_even_with_umask_0(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        listener = bind_private_socket(tmp_path / "s" / "x.sock")
    finally:
        os.umask(old)
    try:
        assert mode_of(tmp_path / "s") == 0o700
        assert mode_of(tmp_path / "s" / "x.sock") == 0o600
        assert stat.S_ISSOCK(os.lstat(tmp_path / "s" / "x.sock").st_mode)
    finally:
        listener.close()


UNSAFE_MODES = [0o720, 0o702, 0o777]
"""Group write alone, other write alone, and both: each lets someone else replace the socket."""


@pytest.mark.parametrize("unsafe", UNSAFE_MODES, ids=[f"{m:04o}" for m in UNSAFE_MODES])
def test_bind_refuses_an_unsafe_dir_and_a_live_socket(tmp_path: Path, unsafe: int) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, unsafe)
    with pytest.raises(SocketDirError) as caught:
        bind_private_socket(loose / "x.sock")
    assert caught.value.fault == "mode"
    assert not (loose / "x.sock").exists()
    listener = bind_private_socket(tmp_path / "p" / "x.sock")
    try:
        with pytest.raises(SocketBindError):
            bind_private_socket(tmp_path / "p" / "x.sock")
    finally:
        listener.close()
    # A stale socket (nobody listens) is replaced.
    again = bind_private_socket(tmp_path / "p" / "x.sock")
    again.close()


def test_peer_uid_reads_so_peercred(tmp_path: Path) -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_uid(left) == os.getuid()


@pytest.mark.parametrize("unsafe", UNSAFE_MODES, ids=[f"{m:04o}" for m in UNSAFE_MODES])
def test_daemon_refuses_an_unsafe_socket_dir(world: DaemonEnv, unsafe: int) -> None:
    world.socket_dir.mkdir(mode=0o700)
    os.chmod(world.socket_dir, unsafe)
    code, error = world.json_error("daemon", "start")
    assert code != 0
    assert error["error"] == "daemon_unavailable"
    assert "chmod go-w" in error["message"]
    assert f"has mode {unsafe:04o}" in error["message"]
    assert str(world.socket_dir) in error["message"]
    assert not world.socket.exists()


def test_daemon_sets_0700_on_agent_dir_and_sessions_root_or_refuses(world: DaemonEnv) -> None:
    world.agent_dir.mkdir(mode=0o755)
    (world.agent_dir / "sessions").mkdir(mode=0o755)
    os.chmod(world.agent_dir, 0o755)
    os.chmod(world.agent_dir / "sessions", 0o775)
    world.json("daemon", "start")
    assert mode_of(world.agent_dir) == 0o700
    assert mode_of(world.agent_dir / "sessions") == 0o700
    world.json("daemon", "stop")
    # A sessions root that cannot be a directory: the daemon does not start.
    (world.agent_dir / "sessions").rmdir()
    (world.agent_dir / "sessions").write_text("not a dir")
    _code, error = world.json_error("daemon", "start")
    assert "did not start" in error["message"]
    assert "sessions" in world.log.read_text()


def SESSION_COMMANDS(session: str) -> list[tuple[str, ...]]:  # noqa: N802
    """The session commands the umask test runs: each makes files (journal, artifacts, a fork's staged copy)."""
    return [
        ("session", "show", session),
        ("bash", "--session", session, "--json", "--", "echo hi > user-file; seq 1 100000"),
        ("bash", "--session", session, "--budget-ms", "0", "--json", "--", "sleep 0.2"),
        ("tree", "fork", "--session", session, "none"),
    ]


def walk_modes(root: Path) -> dict[str, int]:
    """Mode of every dir and file under root (root included), by relative path."""
    found = {".": mode_of(root)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = mode_of(path)
    return found


def test_every_dir_and_file_eukhe_makes_is_private_with_umask_0(world: DaemonEnv, tmp_path: Path) -> None:
    """A fresh home, the CLI (and so the daemon and its workers) run with umask 0: still 0700 dirs, 0600 files."""
    project = tmp_path / "project"
    project.mkdir()
    done = world.cli("daemon", "start", "--json", umask=0)
    assert done.returncode == 0, done.stderr
    done = world.cli("session", "create", "--cwd", str(project), "--json", umask=0)
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["id"]
    for args in SESSION_COMMANDS(session):
        done = world.cli(*args, *([] if "--json" in args else ["--json"]), umask=0)
        assert done.returncode == 0, done.stderr
    seen = {**walk_modes(world.agent_dir), **{f"sock/{k}": v for k, v in walk_modes(world.socket_dir).items()}}
    assert len(seen) > 4
    for name, mode in seen.items():
        path = world.agent_dir / name if not name.startswith("sock/") else world.socket_dir / name[5:]
        kind = os.lstat(path).st_mode
        if stat.S_ISDIR(kind):
            assert mode == 0o700, (name, oct(mode))
        else:
            assert mode == 0o600, (name, oct(mode))
    # The user's files written by tools keep the umask (0 here: 0666).
    assert mode_of(project / "user-file") == 0o666
    assert any("artifacts/" in name for name in seen), "a truncated output spilled to an artifact"
    world.json("daemon", "stop")


def connect_as(uid: int, path: Path) -> str:
    """Fork a client that drops to `uid` (no groups), connects to `path` and sends a ping; what it saw."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.settimeout(10)
            client.connect(str(path))
            client.sendall(b'{"v":1,"id":1,"op":"ping","args":{}}\n')
            data = client.recv(4096)
            outcome = "closed" if data == b"" else "answered:" + data.decode(errors="replace")
        except (ConnectionResetError, BrokenPipeError):
            outcome = "closed"  # closed by the daemon before (or while) the request was written
        except BaseException as error:
            outcome = f"error:{type(error).__name__}:{error}"
        os.write(write_end, outcome.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(child, 0)
    return outcome


def wait_for_log(world: DaemonEnv, text: str) -> str:
    """The daemon log once it holds `text` (bounded wait on the real event of the line being written)."""
    deadline = time.monotonic() + 10
    while text not in world.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    return world.log.read_text()


def test_a_second_user_is_closed_before_any_frame_and_logged(world: DaemonEnv, tmp_path: Path) -> None:
    """The socket loosened to 0666 and its dir to 0711: a client of another uid connects, and is closed unread."""
    if os.getuid() != 0:
        pytest.skip("needs root to become another uid")
    uid = unused_uid()
    world.json("daemon", "start")
    for directory in (world.root, world.tmpdir, world.socket_dir):
        os.chmod(directory, 0o711)
    os.chmod(world.socket, 0o666)
    assert connect_as(uid, world.socket) == "closed"
    log = wait_for_log(world, f"supervisor: refused a connection from uid {uid}")
    assert f"supervisor: refused a connection from uid {uid}" in log
    assert "ping" not in log.split(f"uid {uid}")[1].split("\n")[0]
    # Each worker's listener applies the same rule.
    project = tmp_path / "project"
    project.mkdir()
    session = world.json("session", "create", "--cwd", str(project))["id"]
    (worker,) = [w for w in world.json("daemon", "status")["workers"] if w["session"] == session]
    os.chmod(worker["socket"], 0o666)
    assert connect_as(uid, Path(worker["socket"])) == "closed"
    log = wait_for_log(world, f"worker {session}: refused a connection from uid {uid}")
    assert f"worker {session}: refused a connection from uid {uid}" in log
    # The daemon's own user is still served.
    assert world.json("daemon", "status")["running"] is True


def test_each_session_open_sets_0700_on_its_dir(world: DaemonEnv, tmp_path: Path) -> None:
    """An older eukhe may have made a session dir with the umask: the daemon's reopen makes it 0700 again."""
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    world.json("daemon", "stop")
    directory = world.agent_dir / "sessions" / session
    os.chmod(directory, 0o755)
    assert world.json("session", "show", session)["id"] == session
    assert mode_of(directory) == 0o700
