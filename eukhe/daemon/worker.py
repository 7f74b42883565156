"""A session worker: one process per open session, in the session's working directory, on its own socket.

Started by the supervisor (`python -m eukhe.daemon.worker --socket PATH (--session ID | --create)`), it opens the
session, checks its socket dir and binds (eukhe.daemon.local_access), announces one JSON line on stdout
(`{"ready": true, "session": ID, "pid": N}` or `{"ready": false, "error": CODE, "message": TEXT}`), then serves
requests until its stdin closes (the supervisor stopped or died, or closed the session) or it gets SIGTERM. On the
way out it records the stop on its running jobs' nodes (`daemon_stopped`; `session_closed` when the supervisor said
so on stdin before closing it), closes the session (its jobs end) and kills whatever is left of its children's
process groups.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from eukhe.children import AgentSession
from eukhe.core.jobends import StopReason
from eukhe.daemon.children import daemon_children
from eukhe.daemon.childwatch import PidfdOrThreadWatcher
from eukhe.daemon.host import SessionHost, open_host
from eukhe.daemon.local_access import bind_private_socket, peer_credentials, serve_private
from eukhe.daemon.orphans import become_subreaper, end_orphans
from eukhe.daemon.server import serve_requests
from eukhe.errors import EukheError, error_code
from eukhe.fsio import write_all
from eukhe.records.base import encode
from eukhe.records.daemon import WorkerReady

log = logging.getLogger("eukhe.daemon")


def _announce(ready: WorkerReady) -> None:
    """Write the one ready line on stdout, then point stdout at stderr (the log) so nothing else reaches the pipe."""
    write_all(1, encode(ready) + b"\n")
    os.dup2(2, 1)


async def _stdin_closed() -> StopReason:
    """Return when stdin (the pipe from the supervisor) reaches EOF: why the worker stops. The supervisor writes
    `session_closed` on it before closing it for a `session.close`; a bare EOF is the daemon stopping (or dying)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    said = b""
    try:
        while chunk := await reader.read(4096):
            said = (said + chunk)[-64:]
    finally:
        transport.close()
    return "session_closed" if said.strip() == b"session_closed" else "daemon_stopped"


async def run_worker(socket_path: Path, session_id: str | None, daemon_socket: Path | None = None) -> int:
    """Open the session, bind, serve until told to stop; return the exit code. With `daemon_socket`, the session's
    children are sessions of that daemon (each in its own worker); without, they live in this process."""
    become_subreaper()
    cwd = Path.cwd()
    session_class = daemon_children(daemon_socket) if daemon_socket is not None else AgentSession
    try:
        host = await open_host(session_id, cwd, session_class)
    except EukheError as error:
        _announce(WorkerReady(ready=False, error=error_code(error), message=str(error)))
        return 1
    for private in {socket_path.parent, *(() if daemon_socket is None else (daemon_socket.parent,))}:
        host.session.sandbox.hide(str(private))  # no confined process reaches the daemon or this worker
    try:
        listener = bind_private_socket(socket_path)
        host.socket = str(socket_path)
    except EukheError as error:
        await host.close()  # the session opened: close it (its writer commits, its lock goes) before saying why
        _announce(WorkerReady(ready=False, error=error_code(error), message=str(error)))
        return 1
    try:
        ready = WorkerReady(
            ready=True,
            session=host.session_id,
            pid=os.getpid(),
            socket=str(socket_path),
            notices=list(host.session.notices),
        )
        _announce(ready)
        await _serve_until_stopped(host, listener)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(socket_path)
        try:
            await host.close()
        finally:  # a close that failed midway (a full disk) still leaves no process of this worker's jobs
            await end_orphans(keep=())
    return 0


async def _serve_until_stopped(host: SessionHost, listener: socket.socket) -> None:
    """Serve the worker socket until stdin closes or a signal asks to stop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_credentials(writer.get_extra_info("socket"))
        from_supervisor = peer is not None and peer[0] == os.getppid()  # the supervisor is this worker's reaper
        await serve_requests(reader, writer, host.handle if from_supervisor else host.handle_direct)

    server = asyncio.create_task(serve_private(listener, connection, f"worker {host.session_id}"))
    watcher = asyncio.create_task(_stdin_closed())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({server, watcher, stopper}, return_when=asyncio.FIRST_COMPLETED)
    closed = watcher.done() and not watcher.cancelled() and watcher.exception() is None
    # The stop is recorded on the running jobs before anything (a cancelled call, the close) kills them.
    await host.session.begin_stop(watcher.result() if closed else "daemon_stopped")
    for task in (server, watcher, stopper):
        task.cancel()
    await asyncio.gather(server, watcher, stopper, return_exceptions=True)
    log.info("worker %s for %s stops", os.getpid(), host.session_id)


def main(argv: list[str] | None = None) -> int:
    """Entry point of a worker process."""
    parser = argparse.ArgumentParser(prog="eukhe-worker")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--daemon", help="the supervisor's socket (children are started through it)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--session")
    group.add_argument("--create", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker[%(process)d] %(levelname)s %(message)s")
    daemon = Path(args.daemon) if args.daemon else None
    if sys.version_info < (3, 12):  # 3.12 chooses a pidfd watcher itself (and deprecates choosing one)
        asyncio.set_child_watcher(PidfdOrThreadWatcher())
    return asyncio.run(run_worker(Path(args.socket), None if args.create else args.session, daemon))


if __name__ == "__main__":
    sys.exit(main())
