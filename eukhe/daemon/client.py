"""The CLI's side of the daemon: find the socket, start the daemon on first use, send requests, read replies.

Plain blocking sockets (no asyncio): a CLI call is one short-lived process, and its start-up time is the cost a
user feels (bench/cli_roundtrip.py). So this module imports no more than it needs on the way to a reply: no typing,
pathlib, socket or subprocess (tests/unit/test_cli_imports.py); starting a daemon imports what it needs then.
"""

from __future__ import annotations

import _socket
import errno
import os
import signal
import sys
import time

from eukhe.daemon.replies import EVENT, RESULT, DaemonError, DaemonProtocolError, decode_reply, reply_outcome
from eukhe.daemon.wire import MAX_REPLY_BYTES, MAX_REQUEST_BYTES, encode_request, largest_field, over_field_bound
from eukhe.errors import EukheError, RequestTooLargeError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, TypeVar, overload

    StrPath = str | os.PathLike[str]
    T = TypeVar("T")

RECV_BYTES = 1 << 16
"""How much one read of the socket asks for."""
START_TIMEOUT_S = 20.0
"""How long `daemon start` (or a first CLI call) waits for the socket to answer."""
EXIT_ANOTHER_DAEMON = 75
"""A daemon that exits with this found another one starting on the same socket: poll for that one instead."""


def bounded_request(request_id: int | str, op: str, args: dict[str, Any] | None, what: str | None = None) -> bytes:
    """A request line, as every client writes it, once it is known to fit: each field within its own bound (a bash
    command within what Linux passes as one argument) and the line within the daemon's. Else RequestTooLargeError
    naming the field (the one that takes the most of the line) and the limit, before anything is sent. `what` names
    the request in the message (default: its op)."""
    over = over_field_bound(op, args or {})
    if over is not None:
        field, size, limit, why = over
        raise RequestTooLargeError(what or op, field, size, limit, why)
    line = encode_request(request_id, op, args)
    if len(line) - 1 > MAX_REQUEST_BYTES:
        field, field_bytes = largest_field(args or {}, op)
        measured = f"the request would be {len(line) - 1} bytes, {field_bytes} of them {field} (as JSON)"
        bound = "a request to the daemon carries"
        raise RequestTooLargeError(what or op, field, len(line) - 1, MAX_REQUEST_BYTES, bound, measured=measured)
    return line


def posix_path_text(path: str) -> str:
    """`str(PurePosixPath(path))` without importing pathlib: empty and `.` parts dropped, `..` kept, a leading `//`
    kept (POSIX leaves its meaning to the system)."""
    root = "//" if path.startswith("//") and not path.startswith("///") else "/" if path.startswith("/") else ""
    return root + "/".join(part for part in path.split("/") if part and part != ".") or "."


def default_socket_file() -> str:
    """`$TMPDIR/eukhe-<uid>/daemon.sock`, `/tmp` when TMPDIR is unset or empty (a str, written as a Path would
    write it: the client path does not import pathlib)."""
    base = os.environ.get("TMPDIR") or "/tmp"
    return posix_path_text(f"{base}/eukhe-{os.getuid()}/daemon.sock")


def default_socket_path() -> Path:
    """`default_socket_file()` as a Path (the daemon's side)."""
    from pathlib import Path  # noqa: PLC0415  (lazy: the client path works with str paths; CLI start-up time)

    return Path(default_socket_file())


def socket_path(option: str | None) -> str:
    """The socket the CLI talks to: `--daemon-socket` if given, else the default; made absolute."""
    return os.path.abspath(option) if option else default_socket_file()


def hear_ctrl_c() -> None:
    """Make SIGINT raise KeyboardInterrupt in this process, whatever it inherited: a process started with SIGINT
    ignored (a shell's background job, `nohup`, a supervisor that ignores it) or blocked would otherwise never see
    the Ctrl-C that cancels its job. Only the main thread can set a handler; elsewhere this does nothing."""
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        return
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class DaemonUnavailableError(EukheError):
    """No daemon answers at the socket and none could be started."""

    code = "daemon_unavailable"


class DaemonClient:
    """One connection to a daemon (supervisor or worker); requests go one at a time.

    A bare `_socket.socket` and its own line buffer, not `socket.socket` and `makefile`: importing `socket` (its
    enums, selectors, select, math, array) is a large part of a CLI call's start-up (bench/cli_roundtrip.py).
    """

    def __init__(self, sock: _socket.socket, path: StrPath) -> None:
        self._sock = sock
        self._buffer = bytearray()
        """Bytes received and not yet returned as a reply line."""
        self._next_id = 1
        self.path = path

    @classmethod
    def connect(cls, path: StrPath) -> DaemonClient:
        """Connect, or raise OSError (ENOENT / ECONNREFUSED when no daemon listens)."""
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(os.fspath(path))
        except OSError:
            sock.close()
            raise
        return cls(sock, path)

    if TYPE_CHECKING:  # the typed forms (typing.overload only for mypy: CLI start-up time)

        @overload
        def call(
            self,
            op: str,
            args: dict[str, Any] | None = None,
            on_event: Callable[[Any], None] | None = None,
            *,
            on_interrupt: Callable[[bool], None] | None = None,
            answer: type[T],
        ) -> T: ...

        @overload
        def call(
            self,
            op: str,
            args: dict[str, Any] | None = None,
            on_event: Callable[[Any], None] | None = None,
            *,
            on_interrupt: Callable[[bool], None] | None = None,
            answer: None = None,
        ) -> Any: ...

    def call(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        on_event: Callable[[Any], None] | None = None,
        *,
        on_interrupt: Callable[[bool], None] | None = None,
        answer: type[T] | None = None,
    ) -> Any:
        """Send one request and return its result, as the record `answer` when given (a result that is not one
        raises DaemonProtocolError naming the field); its events go to `on_event`; errors raise DaemonError.

        With `on_interrupt`, a Ctrl-C (KeyboardInterrupt) while waiting asks the daemon to cancel the request (its
        job is killed through its owner) and goes on waiting for its answer: `on_interrupt(True)`. A second one
        calls `on_interrupt(False)` and leaves at once (KeyboardInterrupt)."""
        request_id = self._next_id
        self._next_id += 1
        if on_interrupt is not None:
            hear_ctrl_c()
            # A Ctrl-C while the request goes out waits (blocked) until it is out: then it cancels that request,
            # instead of leaving with the request running (a whole request on the wire, never a part of one).
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                self._send(bounded_request(request_id, op, args))
            finally:
                if on_interrupt is not None:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            return self._answer(request_id, on_event, answer=answer)
        except KeyboardInterrupt:
            if on_interrupt is None:
                raise

        cancel_id = f"cancel-{request_id}"
        try:
            # The cancel is on its way before anything is said: a second Ctrl-C waits until then (it is blocked).
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                self._send(encode_request(cancel_id, "cancel", {"request": request_id}))
                self._relay_events_so_far(request_id, on_event)  # the job's id, if its start is already here
                on_interrupt(True)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            return self._answer(request_id, on_event, skip=cancel_id, answer=answer)
        except KeyboardInterrupt:
            on_interrupt(False)
            raise

    def _answer(
        self,
        request_id: int,
        on_event: Callable[[Any], None] | None,
        skip: str | None = None,
        answer: type[Any] | None = None,
    ) -> Any:
        """Read replies until the one for `request_id` (relaying its events; a reply for `skip` is passed over); its
        result as the record `answer` when given."""
        while True:
            kind, value = reply_outcome(self.read_reply(), request_id, skip, answer)
            if kind == RESULT:
                return value
            if kind == EVENT and on_event is not None:
                on_event(value)

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests of malformed and oversized requests)."""
        self._sock.sendall(data)

    def read_line(self) -> bytes:
        """The next line with its newline; at end of stream the bytes left (empty when none); a line longer than
        MAX_REPLY_BYTES raises DaemonProtocolError."""
        searched = 0
        while True:
            end = self._buffer.find(b"\n", searched)
            if end > MAX_REPLY_BYTES or (end < 0 and len(self._buffer) > MAX_REPLY_BYTES):
                raise DaemonProtocolError(f"a reply line is longer than {MAX_REPLY_BYTES} bytes")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            searched = len(self._buffer)
            try:
                chunk = self._sock.recv(RECV_BYTES)
            except ConnectionResetError:  # the daemon went away (killed, stopped): as an end of the stream
                chunk = b""
            if not chunk:
                line = bytes(self._buffer)
                self._buffer.clear()
                return line
            self._buffer += chunk

    def _relay_events_so_far(self, request_id: int, on_event: Callable[[Any], None] | None) -> None:
        """Relay the events of `request_id` that have already arrived, without waiting for more; the first line
        that is not one of them stays for the next read."""
        if on_event is None:
            return
        while True:
            try:
                chunk = self._sock.recv(RECV_BYTES, _socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError, ConnectionResetError):
                break
            if not chunk:
                break
            self._buffer += chunk
        while (end := self._buffer.find(b"\n")) >= 0:
            try:
                kind, event = reply_outcome(decode_reply(bytes(self._buffer[: end + 1])), request_id)
            except (DaemonError, DaemonProtocolError):
                return
            if kind != EVENT:
                return
            del self._buffer[: end + 1]
            on_event(event)

    def _send(self, data: bytes) -> None:
        """Send bytes on the connection; a daemon that went away is a typed error, not a broken pipe."""
        try:
            self._sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as error:
            raise DaemonProtocolError(f"the daemon at {self.path} closed the connection") from error

    def read_reply(self) -> dict[str, Any]:
        """Read one reply line, as a JSON object."""
        line = self.read_line()
        if not line:
            raise DaemonProtocolError(f"the daemon at {self.path} closed the connection")
        return decode_reply(line)

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_daemon(error: OSError) -> bool:
    return error.errno in (errno.ENOENT, errno.ECONNREFUSED)


def log_path() -> Path:
    """Where a background daemon writes its log: `<agent dir>/daemon.log`."""
    from eukhe.paths import agent_dir  # noqa: PLC0415  (lazy: only a start needs it; CLI start-up time)

    return agent_dir() / "daemon.log"


def spawn_daemon(path: StrPath) -> subprocess.Popen[bytes]:
    """Start a supervisor in the background (its own session), logging to `<agent dir>/daemon.log`."""
    import subprocess  # noqa: PLC0415  (lazy: only a start needs it; CLI start-up time)

    from eukhe.core.own_secrets import without_own_secrets  # noqa: PLC0415  (same reason)
    from eukhe.private_fs import make_private_dirs, open_private_file  # noqa: PLC0415  (same reason)

    log = log_path()
    make_private_dirs(log.parent)
    fd = open_private_file(log)
    _STARTED[:] = [started for started in _STARTED if started.poll() is None]  # reap the ones that ended
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "eukhe.daemon.supervisor", "--socket", os.fspath(path)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
            env=without_own_secrets(os.environ),  # the MCP server's token stays with the server
        )
    finally:
        os.close(fd)
    _STARTED.append(process)
    return process


_STARTED: list[subprocess.Popen[bytes]] = []
"""The daemons this process started: kept, so that a long-lived caller (the MCP server, a program on the Python API)
reaps one that ended (at its next start) and no Popen is dropped while its daemon runs."""


def start_daemon(path: StrPath, timeout_s: float = START_TIMEOUT_S) -> DaemonClient:
    """Start a daemon at `path` and return a connection once it answers; raise DaemonUnavailableError if it does not."""
    import contextlib  # noqa: PLC0415  (lazy: only a start needs it; CLI start-up time)

    process = spawn_daemon(path)
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            return DaemonClient.connect(path)
        except OSError as error:
            if not _no_daemon(error):
                raise DaemonUnavailableError(f"cannot reach the daemon at {path}: {error.strerror}") from error
        code = process.poll()
        if code is not None and code != EXIT_ANOTHER_DAEMON:
            with contextlib.suppress(OSError):
                return DaemonClient.connect(path)
            raise DaemonUnavailableError(f"the daemon did not start (exit {code}): {_log_tail()}")
        if time.monotonic() > deadline:
            raise DaemonUnavailableError(f"the daemon did not answer at {path} within {timeout_s:.0f} s")
        time.sleep(delay)  # polling a real event (the socket answering), bounded by the deadline
        delay = min(delay * 2, 0.1)


def _log_tail() -> str:
    """The last lines of the daemon log, to explain a failed start."""
    try:
        lines = log_path().read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(lines[-3:]) if lines else "(empty log)"


def connect(path: StrPath, *, autostart: bool = True) -> DaemonClient:
    """Connect to the daemon at `path`, starting one first when none answers (and `autostart`)."""
    try:
        return DaemonClient.connect(path)
    except OSError as error:
        if not _no_daemon(error) or not autostart:
            raise DaemonUnavailableError(f"no daemon answers at {path}: {error.strerror}") from error
    return start_daemon(path)


__all__ = ["DaemonClient", "DaemonError", "DaemonProtocolError", "DaemonUnavailableError", "connect", "reply_outcome"]
