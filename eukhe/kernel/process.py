"""The kernel's process (S3 "The protocol" 1, "Where the sandbox runs" 1): spawn, pipes, terminate.

`KernelProcess.spawn` starts the command a `KernelLaunch` names in its own process group with three pipes; stdout
bytes go to the one `on_stdout` callback as they come (no reader task between), stderr is kept as a tail and logged.
Every wait here runs on the injected `Clock`, in integer milliseconds, so a virtual clock covers a kernel's whole end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path

from eukhe.clock import Clock, wait_within
from eukhe.kernel.errors import KernelStartError
from eukhe.kernel.launch import KernelLaunch
from eukhe.procs import reap_ended_child
from eukhe.sandbox.group import namespace_gone, namespace_of
from eukhe.sandbox.seccomp import keyring_filtered

log = logging.getLogger("eukhe.kernel")

STDERR_TAIL = 8192


class _KernelPipes(asyncio.subprocess.SubprocessStreamProtocol):
    """The kernel's pipes: stdout bytes go to the frame reader inside the callback (no reader task between)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=1 << 16, loop=loop)
        self._on_stdout: Callable[[bytes], None] | None = None
        self._early: list[bytes] = []
        self.stdout_closed: asyncio.Future[None] = loop.create_future()

    def attach(self, on_stdout: Callable[[bytes], None]) -> None:
        """Start handing stdout to `on_stdout` (with what came before)."""
        self._on_stdout = on_stdout
        early, self._early = self._early, []
        for data in early:
            on_stdout(data)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if fd != 1:
            super().pipe_data_received(fd, data)
            return
        chunk = data.encode() if isinstance(data, str) else data
        if self._on_stdout is None:
            self._early.append(chunk)
        else:
            self._on_stdout(chunk)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        super().pipe_connection_lost(fd, exc)
        if fd == 1 and not self.stdout_closed.done():
            self.stdout_closed.set_result(None)


class _DirectStdout(asyncio.Protocol):
    """The stdout pipe's protocol: its bytes go to `_KernelPipes` at once; the subprocess transport would hand
    them on with `call_soon`, one loop turn later on every frame. The pipe's end still goes the transport's way."""

    def __init__(self, inner: asyncio.BaseProtocol, pipes: _KernelPipes) -> None:
        self._inner = inner
        self._pipes = pipes

    def data_received(self, data: bytes) -> None:
        self._pipes.pipe_data_received(1, data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if isinstance(self._inner, asyncio.Protocol) else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)


class KernelProcess:
    """One kernel process: its pipes, its exit, its stderr tail; `terminate` ends it and everything of it."""

    def __init__(self, process: asyncio.subprocess.Process, pipes: _KernelPipes, launch: KernelLaunch) -> None:
        self.process = process
        self.pid = process.pid
        self.launch = launch
        self._pipes = pipes
        self.stdout_closed = pipes.stdout_closed
        self.stderr_tail = bytearray()
        self.namespace: tuple[int, int] | None = None  # a confined kernel's pid 1 (pid, start ticks)
        self.exited: asyncio.Future[int] = asyncio.ensure_future(process.wait())
        self._stderr = asyncio.ensure_future(self._read_stderr())

    @classmethod
    async def spawn(cls, launch: KernelLaunch, cwd: Path | None) -> KernelProcess:
        """Start the kernel in its own process group (its pid is the group id); a wrapped kernel's stub goes first
        on its stdin. An OS refusal is a `KernelStartError`."""
        loop = asyncio.get_running_loop()
        try:
            with keyring_filtered(launch.argv, confined=launch.pid_namespace) as (argv, filter_fds):
                transport, pipes = await loop.subprocess_exec(
                    lambda: _KernelPipes(loop),
                    *argv,
                    env=dict(launch.env),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    process_group=0,
                    cwd=launch.cwd or cwd,
                    pass_fds=filter_fds,
                )
        except OSError as exc:
            raise KernelStartError(f"the Python kernel could not start ({launch.argv[0]}): {exc}") from exc
        process = asyncio.subprocess.Process(transport, pipes, loop)
        if launch.preamble and process.stdin is not None:
            process.stdin.write(launch.preamble)  # a wrapped kernel's stub, before any request
        stdout_pipe = transport.get_pipe_transport(1)
        if isinstance(stdout_pipe, asyncio.ReadTransport):
            stdout_pipe.set_protocol(_DirectStdout(stdout_pipe.get_protocol(), pipes))
        return cls(process, pipes, launch)

    def attach(self, on_stdout: Callable[[bytes], None]) -> None:
        """Hand stdout to `on_stdout` from now on (with what came before)."""
        self._pipes.attach(on_stdout)

    def started(self) -> None:
        """The kernel is ready: note a confined kernel's pid namespace, whose end its own end waits for."""
        if self.launch.pid_namespace:
            self.namespace = namespace_of(self.pid)

    @property
    def stdin_open(self) -> bool:
        stdin = self.process.stdin
        return stdin is not None and not stdin.is_closing()

    def write(self, line: bytes) -> bool:
        """Write a line to the kernel's stdin; False once it is closing."""
        stdin = self.process.stdin
        if stdin is None or stdin.is_closing():
            return False
        stdin.write(line)
        return True

    async def drain(self) -> None:
        stdin = self.process.stdin
        if stdin is not None:
            with contextlib.suppress(ConnectionError):
                await stdin.drain()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def tail(self) -> str:
        """The end of what the stub wrote to its stderr (start-up failures)."""
        return self.stderr_tail.decode("utf-8", "replace").strip()

    async def terminate(self, clock: Clock, grace_ms: int, child_groups: Iterable[int]) -> int:
        """Close stdin, give the stub `grace_ms` on `clock` to reap its `bash()` groups and exit, kill its group,
        wait for it (and a confined kernel's namespace), then kill the `child_groups` it left; its exit code."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        await wait_within(clock, self.exited, grace_ms)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        code = await asyncio.shield(self.exited)
        if self.namespace is not None:  # its pid namespace ends after bwrap: wait until nothing of it runs
            await namespace_gone(self.namespace, clock)
            reap_ended_child(*self.namespace)  # pid 1 ended after bwrap: a subreaper host is its parent now
        for pgid in sorted(child_groups):  # the stub may have died before it could kill them
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        await asyncio.gather(self._stderr, return_exceptions=True)
        if stdin is not None:
            with contextlib.suppress(Exception):
                await stdin.wait_closed()
        return code

    async def _read_stderr(self) -> None:
        """The stub's own stderr: kept as a tail and logged."""
        stderr = self.process.stderr
        assert stderr is not None
        while data := await stderr.read(65536):
            self.stderr_tail += data
            del self.stderr_tail[:-STDERR_TAIL]
            log.warning("python kernel stderr: %s", data.decode("utf-8", "replace").rstrip())
