"""The warm fork server: one pre-imported process that starts session workers by forking.

A session worker started the plain way is a fresh Python that imports the whole stack (0.3-0.5 s, ~27 MB private
each). The supervisor instead starts this process once (`python -m eukhe.daemon.forkserver`, its stdin a
SOCK_SEQPACKET socket to the supervisor); it imports everything a worker runs, freezes the heap for the garbage
collector (so the collector does not write to the shared pages), says `ready`, and then answers each `ForkRequest`
(with the worker's stdin and stdout attached as descriptors) by forking twice: the intermediate child forks the
worker and exits at once, so the worker is reparented to the supervisor (a child subreaper) and is its child as a
plainly spawned worker would be: the supervisor waits for it, kills it and ends what its jobs leave. The answer
(`Forked`) carries the worker's pid once that reparenting is done.

The worker then starts as `python -m eukhe.daemon.worker` would: a session of its own, its stdin and stdout the
supervisor's pipes, the working directory and environment of the request, default signal dispositions, and the same
`main`. Its pages are shared copy-on-write with this process and its siblings, so a worker costs a few MB of its own.

This process takes no part in serving: it holds no session, no socket but its control socket, no thread. When the
supervisor goes (its control socket closes), it exits. The supervisor's side is `eukhe.daemon.spawning`.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import signal
import socket
import sys
import tempfile
import threading
import traceback
from pathlib import Path

from eukhe.daemon.orphans import libc
from eukhe.records.base import decode_json, encode
from eukhe.records.daemon import Forked, ForkRequest, WorkerReady

MAX_REQUEST_BYTES = 1 << 20
"""The longest fork request (its environment included; a client's request never passes through here)."""
READY = b"ready"
PR_SET_NAME = 15
WORKER_PROCESS_NAME = "eukhe-worker"
"""A forked worker's process name (`ps -e`, /proc/PID/comm); its command line stays the fork server's."""

WARM_MODULES = (
    "eukhe.daemon.worker",
    "eukhe.kernel.bootstrap",
    "eukhe.kernel.bootstrap.setup",
    "eukhe.kernel.bootstrap.venv",
    "eukhe.workspace.spawn",
    "eukhe.workspace.handback",
    "asyncio.subprocess",
    "asyncio.unix_events",
    "concurrent.futures.thread",
)
"""Imported before any fork: what a worker imports at once or on its first requests (a module imported after the
fork is the worker's own memory)."""


def warm_up() -> None:
    """Import what workers run, run what every worker runs once (see `rehearse`), then freeze the heap: collections
    in the workers leave these objects' pages alone."""
    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    libc()  # loaded once, here: every worker has it
    try:
        rehearse()
    except Exception:  # a rehearsal that fails costs memory, never a worker: say so and go on
        traceback.print_exc()
    gc.collect()
    gc.freeze()


def rehearse() -> None:
    """Create a throwaway session in a private temporary root, run `bash true` and list its jobs, close it, remove
    it. What a worker would build on its first requests (msgspec's encoders and decoders of each record type, the
    interpreter's specialized bytecode, compiled patterns, cached lookups) is then built here, once, and shared."""
    import asyncio  # noqa: PLC0415 - imported (warm) above; nothing here runs before the warm-up

    from eukhe.children import AgentSession  # noqa: PLC0415

    async def run(place: Path) -> None:
        session = await AgentSession.create(place, root=place / "sessions", kernel_transport=None)
        try:
            for _ in range(3):
                answer = await session.execute_bash_and_wait("true")
                encode(answer)
                session.jobs.list()
                session.system_prompt()
        finally:
            await session.close()

    with tempfile.TemporaryDirectory(prefix="eukhe-rehearsal-") as place:
        asyncio.run(run(Path(place)))
    for thread in threading.enumerate():  # asyncio's child watchers: none may be left when this process forks
        if thread is not threading.main_thread():
            thread.join(timeout=10)


def serve(control: socket.socket) -> None:
    """Answer fork requests until the supervisor closes the control socket."""
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(control, MAX_REQUEST_BYTES, 2)
        except InterruptedError:
            continue
        if not message:
            for fd in fds:
                os.close(fd)
            return
        try:
            answer = _fork(control, message, fds)
        finally:
            for fd in fds:
                os.close(fd)
        control.sendall(encode(answer))


def _fork(control: socket.socket, message: bytes, fds: list[int]) -> Forked:
    """Fork a worker for one request (twice: see the module docstring); its pid, or why not."""
    try:
        request = decode_json(message, ForkRequest, code="bad_args", what="a fork request")
    except Exception as error:
        return Forked(error=f"{type(error).__name__}: {error}")
    if len(fds) != 2:
        return Forked(error=f"a fork request needs 2 descriptors (stdin, stdout), got {len(fds)}")
    read_pid, write_pid = os.pipe()
    try:
        intermediate = os.fork()
    except OSError as error:
        os.close(read_pid)
        os.close(write_pid)
        return Forked(error=f"fork failed: {error.strerror or error}")
    if intermediate == 0:  # the intermediate child: fork the worker, tell its pid, exit at once
        code = 1
        try:
            os.close(read_pid)
            worker = os.fork()
            if worker == 0:
                os.close(write_pid)
                _become_worker(control, fds, request)  # never returns
            os.write(write_pid, worker.to_bytes(8, "little"))
            code = 0
        finally:
            os._exit(code)
    os.close(write_pid)
    try:
        data = b""
        while len(data) < 8 and (chunk := os.read(read_pid, 8 - len(data))):
            data += chunk
    finally:
        os.close(read_pid)
    os.waitpid(intermediate, 0)  # reaped: the worker, its child, has been reparented to the supervisor
    if len(data) != 8:
        return Forked(error="the worker could not be forked")
    return Forked(pid=int.from_bytes(data, "little"))


def _become_worker(control: socket.socket, fds: list[int], request: ForkRequest) -> None:
    """In the forked worker: its own session, the supervisor's pipes as stdin and stdout, the request's directory and
    environment, default signals; then the worker's `main`. Never returns."""
    code: object = 1
    try:
        control.close()
        os.setsid()
        stdin, stdout = fds
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        for fd in fds:
            os.close(fd)
        _name_process(WORKER_PROCESS_NAME.encode())
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        os.environb.clear()
        os.environb.update(dict(request.env))
        try:
            os.chdir(request.cwd)
        except OSError as error:
            message = f"cannot enter the working directory: {error.strerror or error}"
            os.write(1, encode(WorkerReady(ready=False, error="working_dir_error", message=message)) + b"\n")
            return
        from eukhe.daemon import worker  # noqa: PLC0415 - imported (warm) before the fork; this is a lookup

        argv = ["--socket", os.fsdecode(request.socket), "--daemon", os.fsdecode(request.daemon)]
        argv += ["--session", request.session] if request.session is not None else ["--create"]
        sys.argv = [sys.argv[0], *argv]
        code = worker.main(argv)
    except SystemExit as done:
        code = done.code
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def _name_process(name: bytes) -> None:
    """Set the process name `ps -e` and `top` show (its command line stays the fork server's)."""
    with contextlib.suppress(OSError, AttributeError):
        libc().prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


def main() -> int:
    """Entry point: stdin is the control socket; warm up, say ready, serve. (`--daemon PATH`, the daemon's socket,
    is only there for `ps`: it names whose fork server this is, and whose workers its children are.)"""
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # fd 0 is the workers' to take; nothing here reads it
    os.close(null)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at a foreground daemon is the supervisor's to handle
    warm_up()
    control.sendall(READY)
    with contextlib.suppress(ConnectionError):
        serve(control)
    return 0


if __name__ == "__main__":
    sys.exit(main())
