"""Local access, the shell side ("Local access" 1-3): read the facts, ask eukhe.core.fsmode, do what it answers.

The socket directory is checked before every bind (supervisor and workers); a missing one is created 0700 in one
step and looked at again. The socket file is 0600 right after its bind, or the bind fails. Every accepted
connection's SO_PEERCRED uid is judged before a single byte is read from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from eukhe.clock import Clock, MonotonicClock, sleep_ms
from eukhe.core.fsmode import (
    PRIVATE_DIR_MODE,
    Create,
    Found,
    Made,
    PeerAccepted,
    SocketDirFact,
    SocketDirRefused,
    Use,
    creation_mode,
    judge_peer,
    judge_socket_dir,
    refusal_message,
)
from eukhe.errors import EukheError
from eukhe.paths import agent_dir, sessions_root
from eukhe.private_fs import make_private_dirs

log = logging.getLogger("eukhe.daemon")

SUN_PATH_MAX = 107
ACCEPT_RETRY_MS = 100
"""After an accept failed for want of resources (out of descriptors or memory), wait this long and accept again."""
_ACCEPT_SHORTAGES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED})
"""Longest AF_UNIX path Linux accepts (108 bytes with the terminating NUL)."""


class SocketDirError(EukheError):
    """The socket directory is unsafe or cannot be made: the daemon does not start. Names the dir, fault and fix."""

    code = "unsafe_socket_dir"

    def __init__(self, message: str, path: Path, fault: str) -> None:
        super().__init__(message)
        self.path = path
        self.fault = fault


class SocketBindError(EukheError):
    """The socket could not be bound, made 0600, or its path is taken by a live daemon."""

    code = "socket_bind_failed"

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


class StateDirError(EukheError):
    """The agent dir or sessions root could not be made private (0700): the daemon does not start."""

    code = "state_dir_not_private"

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def socket_dir_fact(path: Path, daemon_uid: int, created: bool) -> SocketDirFact:
    """What lstat finds at `path` (symlinks not followed), as the core's fact."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return SocketDirFact(Found.MISSING, 0, 0, daemon_uid, created)
    if stat.S_ISLNK(info.st_mode):
        found = Found.SYMLINK
    elif stat.S_ISDIR(info.st_mode):
        found = Found.DIR
    else:
        found = Found.NOT_DIR
    return SocketDirFact(found, info.st_uid, stat.S_IMODE(info.st_mode), daemon_uid, created)


def ensure_socket_dir(path: Path, daemon_uid: int | None = None) -> Path:
    """Check (and if missing create) a socket directory; return it when private, else raise SocketDirError."""
    uid = os.getuid() if daemon_uid is None else daemon_uid
    created = False
    while True:
        verdict = judge_socket_dir(socket_dir_fact(path, uid, created))
        if isinstance(verdict, Use):
            return path
        if isinstance(verdict, SocketDirRefused):
            raise SocketDirError(refusal_message(verdict, str(path)), path, verdict.fault.value)
        assert isinstance(verdict, Create)
        try:
            make_private_dirs(path)
        except OSError as error:
            raise SocketDirError(
                f"cannot create daemon socket directory {path}: {error.strerror}; "
                "fix: give --daemon-socket a path in a private directory",
                path,
                "create_failed",
            ) from error
        created = True


def ensure_private_state_dirs() -> tuple[Path, Path]:
    """At each daemon start: make the agent dir and sessions root exist with 0700, or raise StateDirError."""
    made: list[Path] = []
    for directory in (agent_dir(), sessions_root()):
        try:
            make_private_dirs(directory)
            if not stat.S_ISDIR(os.stat(directory).st_mode):
                raise StateDirError(f"cannot make {directory} private (0700): it is not a directory", directory)
            os.chmod(directory, PRIVATE_DIR_MODE)
        except OSError as error:
            raise StateDirError(f"cannot make {directory} private (0700): {error.strerror}", directory) from error
        made.append(directory)
    return made[0], made[1]


def socket_is_live(path: Path) -> bool:
    """True if something accepts connections at the socket path."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(os.fspath(path))
    except OSError:
        return False
    else:
        return True
    finally:
        probe.close()


def bind_private_socket(path: Path, daemon_uid: int | None = None) -> socket.socket:
    """Check the socket dir, bind a listening Unix socket at `path` and make it 0600 (else the bind fails)."""
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise SocketBindError(f"socket path {path} is longer than {SUN_PATH_MAX} bytes; choose a shorter one", path)
    ensure_socket_dir(path.parent, daemon_uid)
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(path)
        if not stat.S_ISSOCK(info.st_mode):
            raise SocketBindError(f"{path} exists and is not a socket; remove it or choose another path", path)
        if socket_is_live(path):
            raise SocketBindError(f"a daemon already listens on {path}", path)
        os.unlink(path)  # a stale socket a crashed daemon left
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(os.fspath(path))
        try:
            os.chmod(path, creation_mode(Made.SOCKET))
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise SocketBindError(f"cannot set mode 0600 on socket {path}: {error.strerror}", path) from error
        listener.listen(128)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


def peer_credentials(conn: Any) -> tuple[int, int] | None:
    """The peer's (pid, uid) from SO_PEERCRED (of a socket, or the transport's wrapper of one), or None when they
    cannot be read."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
    except (OSError, struct.error, AttributeError):
        return None
    return int(pid), int(uid)


def peer_uid(conn: socket.socket) -> int | None:
    """The peer's uid from SO_PEERCRED, or None when it cannot be read."""
    found = peer_credentials(conn)
    return found[1] if found is not None and found[1] >= 0 else None


ConnectionHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve_private(
    listener: socket.socket,
    handler: ConnectionHandler,
    name: str,
    daemon_uid: int | None = None,
    clock: Clock | None = None,
) -> None:
    """Accept connections forever; judge each peer's uid before reading anything, serve only the daemon's uid (a
    shortage of fds is waited out on `clock`). Cancelled, it closes the listener, then every connection."""
    uid = os.getuid() if daemon_uid is None else daemon_uid
    pause_clock: Clock = clock or MonotonicClock()
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    try:
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as error:
                if error.errno not in _ACCEPT_SHORTAGES:
                    raise
                log.warning("%s: cannot accept a connection now (%s); trying again", name, error.strerror)
                await sleep_ms(pause_clock, ACCEPT_RETRY_MS)  # the pending client waits in the backlog meanwhile
                continue
            found = peer_uid(conn)
            verdict = judge_peer(found, uid)
            if not isinstance(verdict, PeerAccepted):
                log.warning("%s: refused a connection from uid %s (only uid %d is served)", name, found, uid)
                conn.close()
                continue
            task = asyncio.create_task(_serve_one(conn, handler))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        # Refuse new connections before the open ones close: a client that sees its connection end and connects
        # again (a ping: is the server going away?) is refused at once, not left in a backlog nobody accepts from.
        listener.close()
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _serve_one(conn: socket.socket, handler: ConnectionHandler) -> None:
    """Wrap an accepted, judged connection in streams and run the handler; always close it."""
    try:
        reader, writer = await asyncio.open_unix_connection(sock=conn)
    except BaseException:  # cancelled (the server stops) or refused before the streams own the socket
        conn.close()
        raise
    try:
        await handler(reader, writer)
    finally:
        writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await writer.wait_closed()
