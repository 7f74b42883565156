"""How the supervisor starts session workers: forked by the warm fork server, or as a fresh Python.

`ForkServer` runs `eukhe.daemon.forkserver` (started once, at the daemon's start) and asks it for workers over a
SOCK_SEQPACKET socket, each request carrying the worker's stdin read end and stdout write end. A forked worker is
the supervisor's child (the fork server forks twice; the supervisor is a child subreaper), watched through a pidfd:
`ForkedWorker`. `ExecWorker` wraps the plain way (`asyncio.create_subprocess_exec` of `python -m
eukhe.daemon.worker`), used when `EUKHE_WORKER_START=exec`, when the fork server cannot start, or when it fails.
Both answer the same `WorkerProcess` protocol: pid, returncode, wait, kill, the ready line, close stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Protocol

from eukhe.clock import Clock, MonotonicClock
from eukhe.daemon.waits import bounded
from eukhe.errors import EukheError
from eukhe.records.base import decode_json, encode
from eukhe.records.daemon import Forked, ForkRequest

log = logging.getLogger("eukhe.daemon")

START_ENV = "EUKHE_WORKER_START"
"""`exec` starts every worker as a fresh Python (the fork server is not used); unset or `fork`: forked."""
FORK_SERVER_START_MS = 60_000
"""How long the fork server may take to import everything and say it is ready."""
FORK_ANSWER_MS = 10_000
"""How long one fork may take to be answered."""
FORK_SERVER_STOP_MS = 5_000
"""How long a stopping fork server may take to exit before it is killed."""
MAX_ANSWER_BYTES = 1 << 16


class ForkServerError(EukheError):
    """The fork server could not start, or did not answer a fork: the worker is started the plain way instead."""

    code = "worker_start_failed"


class WorkerProcess(Protocol):
    """A session worker process, however it was started."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def kill(self) -> None: ...

    async def ready_line(self) -> bytes: ...

    def close_stdin(self, last_words: bytes = b"") -> None:
        """Write `last_words` (why the worker stops, e.g. `session_closed`), if any, then close its stdin."""
        ...


class ExecWorker:
    """A worker started as `python -m eukhe.daemon.worker ...` (a fresh interpreter)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, args: list[str], cwd: str, *, env: dict[str, str] | None = None) -> ExecWorker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "eukhe.daemon.worker",
            *args,
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        return cls(process)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int:
        return await self.process.wait()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def ready_line(self) -> bytes:
        assert self.process.stdout is not None
        return await self.process.stdout.readline()

    def close_stdin(self, last_words: bytes = b"") -> None:
        if self.process.stdin is not None:
            if last_words:
                with contextlib.suppress(OSError):  # a worker already gone: nothing to tell
                    self.process.stdin.write(last_words)
            self.process.stdin.close()


class ForkedWorker:
    """A worker the fork server forked: the supervisor's child, its end seen through a pidfd, reaped here."""

    def __init__(self, pid: int, stdin: int, stdout: asyncio.StreamReader) -> None:
        self._pid = pid
        self._stdin: int | None = stdin
        self._stdout = stdout  # its transport closes itself at the pipe's EOF (right after the ready line)
        self._returncode: int | None = None
        loop = asyncio.get_running_loop()
        self._ended: asyncio.Future[int] = loop.create_future()
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # it ended and was reaped already (its exit code is lost): an end at start
            self._returncode = 255
            self._ended.set_result(255)
            return
        loop.add_reader(self._pidfd, self._on_end)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def _on_end(self) -> None:
        """The pidfd is readable: the process ended. Reap it (it is our child) and keep its exit code."""
        try:
            done, status = os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:  # someone else reaped it: the code is lost
            done, status = self._pid, -1
        if done == 0:
            return
        self._returncode = os.waitstatus_to_exitcode(status) if status != -1 else 255
        self._close_pidfd()
        if not self._ended.done():
            self._ended.set_result(self._returncode)

    def _close_pidfd(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    async def wait(self) -> int:
        return await asyncio.shield(self._ended)

    def kill(self) -> None:
        if self._returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)

    async def ready_line(self) -> bytes:
        return await self._stdout.readline()

    def close_stdin(self, last_words: bytes = b"") -> None:
        fd, self._stdin = self._stdin, None
        if fd is not None:
            if last_words:
                with contextlib.suppress(OSError):  # a worker already gone: nothing to tell
                    os.write(fd, last_words)  # a few bytes into an empty pipe: never blocks
            os.close(fd)


class ForkServer:
    """The supervisor's handle on its fork server: start it, ask it for workers, stop it."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or MonotonicClock()
        self.process: asyncio.subprocess.Process | None = None
        self._control: socket.socket | None = None
        self._lock = asyncio.Lock()
        self.forks = 0

    @property
    def pid(self) -> int | None:
        process = self.process
        return process.pid if process is not None and process.returncode is None else None

    @property
    def running(self) -> bool:
        return self.pid is not None and self._control is not None

    async def start(self, daemon: Path) -> None:
        """Start the fork server of the daemon at `daemon` and wait for its `ready` (it imports the whole worker
        first). The daemon's socket is on its command line, which its forked workers share: `ps` tells whose they
        are."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "eukhe.daemon.forkserver",
                "--daemon",
                str(daemon),
                stdin=theirs.fileno(),
                cwd="/",
                start_new_session=True,
            )
        except OSError as error:
            mine.close()
            raise ForkServerError(f"the fork server did not start: {error.strerror or error}") from error
        finally:
            theirs.close()
        mine.setblocking(False)
        self._control = mine
        try:
            said = await bounded(self.clock, asyncio.get_running_loop().sock_recv(mine, 64), FORK_SERVER_START_MS)
        except (TimeoutError, OSError) as error:
            await self.stop()
            raise ForkServerError(f"the fork server did not get ready: {error}") from error
        if said != b"ready":
            await self.stop()
            raise ForkServerError(f"the fork server did not get ready (it said {said!r})")
        log.info("fork server %d ready", self.pid)

    async def fork(
        self, session_id: str | None, cwd: str, sock: Path, daemon: Path, *, env: dict[str, str] | None = None
    ) -> ForkedWorker:
        """A worker forked for `session_id` (None: a new session) in `cwd`, with this process's environment and
        `env` over it."""
        control = self._control
        if control is None or self.pid is None:
            raise ForkServerError("the fork server is not running")
        loop = asyncio.get_running_loop()
        stdin_read, stdin_write = os.pipe()
        try:
            stdout_read, stdout_write = os.pipe()
        except OSError:  # out of fds (EMFILE): the first pipe must not leak
            os.close(stdin_read)
            os.close(stdin_write)
            raise
        request = ForkRequest(
            socket=os.fsencode(sock),
            daemon=os.fsencode(daemon),
            session=session_id,
            cwd=os.fsencode(cwd),
            env=sorted({**os.environb, **{os.fsencode(k): os.fsencode(v) for k, v in (env or {}).items()}}.items()),
        )
        # The request and its answer are one exchange that a cancelled caller (a client that left, a protocol
        # `cancel`) must not cut: an answer left unread on the socket would be read by the next fork as its own,
        # pairing that worker's pid with another worker's pipes. So the exchange runs as a task of its own, which
        # closes the worker's ends of the pipes once sent; a worker forked for a caller that left is killed.
        asking = asyncio.ensure_future(self._ask(control, encode(request), stdin_read, stdout_write))
        try:
            data = await asyncio.shield(asking)
            if not data:
                await self.stop()
                raise ForkServerError("the fork server closed its socket")
            answer = decode_json(data, Forked, code="daemon_protocol", what="the fork server's answer")
            if answer.pid is None:
                raise ForkServerError(f"the fork server could not fork: {answer.error}")
        except BaseException:
            os.close(stdin_write)
            os.close(stdout_read)
            if not asking.done():
                asking.add_done_callback(_kill_unclaimed)
            raise
        self.forks += 1
        try:
            reader = asyncio.StreamReader()
            await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdout_read, "rb", buffering=0)
            )
            return ForkedWorker(answer.pid, stdin_write, reader)
        except BaseException:  # e.g. no fd left for its pidfd: the worker and its stdin pipe go
            with contextlib.suppress(ProcessLookupError):
                os.kill(answer.pid, signal.SIGKILL)
            os.close(stdin_write)
            raise

    async def _ask(self, control: socket.socket, request: bytes, stdin_read: int, stdout_write: int) -> bytes:
        """Send one fork request with the worker's ends of its pipes (closed here, sent or not: each exactly once)
        and read its answer, one exchange at a time (the lock covers both). A fork server that does not answer is
        stopped (the next fork starts another)."""
        try:
            await self._lock.acquire()
        except BaseException:
            os.close(stdin_read)
            os.close(stdout_write)
            raise
        try:
            try:
                socket.send_fds(control, [request], [stdin_read, stdout_write])
            finally:  # the worker holds its own copies now (or there is no worker)
                os.close(stdin_read)
                os.close(stdout_write)
            return await bounded(
                self.clock, asyncio.get_running_loop().sock_recv(control, MAX_ANSWER_BYTES), FORK_ANSWER_MS
            )
        except (OSError, TimeoutError) as error:
            await self.stop()
            raise ForkServerError(f"the fork server did not answer: {error}") from error
        finally:
            self._lock.release()

    async def stop(self) -> None:
        """Close the control socket (the fork server exits at its EOF) and wait for it, killing it if it lingers."""
        control, self._control = self._control, None
        if control is not None:
            control.close()
        process = self.process
        if process is None:
            return
        try:
            await bounded(self.clock, process.wait(), FORK_SERVER_STOP_MS)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


def _kill_unclaimed(asking: asyncio.Future[bytes]) -> None:
    """The answer to a fork whose caller left: kill the worker it names (the supervisor reaps it as an orphan)."""
    if asking.cancelled() or asking.exception() is not None:
        return
    with contextlib.suppress(EukheError):
        answer = decode_json(asking.result(), Forked, code="daemon_protocol", what="the fork server's answer")
        if answer.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(answer.pid, signal.SIGKILL)


def fork_wanted() -> bool:
    """Whether workers are forked by the fork server (`EUKHE_WORKER_START` is not `exec`; Linux's pidfd exists)."""
    return os.environ.get(START_ENV, "fork") != "exec" and hasattr(os, "pidfd_open")
