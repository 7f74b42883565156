"""eukhe's HTTP proxy for a session whose network is an allowlist (docs/sandbox.md "The network allowlist"; the
decisions are `eukhe.core.allowlist`'s).

One proxy per session, on a thread of its own with its own event loop (so a busy session loop never slows a
download, and the sandbox's launch stays a plain function). It listens on a Unix socket in a private directory,
which each launch binds read-only into its sandbox; the sandbox's pid 1 (`eukhe.sandbox.netinit`) connects to it
and sends it each TCP connection it accepts on the sandbox's loopback, as a descriptor. The proxy reads the request
head from that descriptor, asks the core what it is and whether it may go, resolves an allowed name itself (the
sandbox resolves nothing), connects, and relays. Every attempt is recorded: in memory for the refusal hint
(`take_refused`), and one JSON line each in the session's `network.jsonl` (`eukhe session network`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

import msgspec

from eukhe.core import allowlist as core
from eukhe.core.sandbox import BRIDGE_SOCKET
from eukhe.records.network import NetworkAttempt

log = logging.getLogger("eukhe.sandbox.netproxy")

HEAD_TIMEOUT_S = 30.0
"""A client that has not sent its whole request head by then is dropped."""
CONNECT_TIMEOUT_S = 30.0
"""An allowed host that does not answer by then fails the attempt (502)."""
CHUNK = 1 << 16
MAX_FDS = 16
LOG_NAME = "network.jsonl"
"""The session's record of its connection attempts, in its own directory."""
MAX_REFUSED = 64
"""How many refusals are kept for the next answer's hint (the log keeps them all)."""


class NetProxy:
    """One session's proxy. `start()` opens its socket (in a fresh private directory: `directory`); `close()` ends
    it and removes the directory."""

    def __init__(self, found: core.Rules, log_path: Path) -> None:
        self.rules = found
        self.log_path = log_path
        self.directory = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._listener: socket.socket | None = None
        self._refused: list[NetworkAttempt] = []
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self.directory = tempfile.mkdtemp(prefix="eukhe-net-", dir=_short_tmp())
        os.chmod(self.directory, 0o755)  # the sandbox's user (the same uid) reaches the socket through it
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(os.path.join(self.directory, BRIDGE_SOCKET))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.add_reader(listener.fileno(), self._accept)
            loop.call_soon(ready.set)
            loop.run_forever()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(RuntimeError):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="eukhe-netproxy", daemon=True)
        self._thread.start()
        ready.wait(5)

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
        if self._listener is not None:
            self._listener.close()
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
        self._thread = None

    def take_refused(self) -> list[NetworkAttempt]:
        """The refusals since the last call."""
        with self._lock:
            taken, self._refused = self._refused, []
        return taken

    # ---- on the proxy's thread ---------------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        assert self._loop is not None
        while True:
            try:
                control, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            control.setblocking(False)
            self._loop.add_reader(control.fileno(), self._receive, control)

    def _receive(self, control: socket.socket) -> None:
        assert self._loop is not None
        try:
            data, fds, _, _ = socket.recv_fds(control, 16, MAX_FDS)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        for fd in fds:
            self._spawn(fd)
        if not data and not fds:
            self._loop.remove_reader(control.fileno())
            control.close()

    def _spawn(self, fd: int) -> None:
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
                return
            client = socket.socket(fileno=fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.close(fd)
            return
        if client.type != socket.SOCK_STREAM:
            client.close()
            return
        client.setblocking(False)
        task = asyncio.ensure_future(self._serve(client))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, client: socket.socket) -> None:
        started_ms, began = int(time.time() * 1000), time.monotonic()
        reader, writer = await asyncio.open_connection(sock=client, limit=core.MAX_HEAD)
        try:
            attempt = await self._handle(reader, writer, started_ms, began)
        except Exception as error:
            log.debug("proxy connection failed: %r", error)
            attempt = NetworkAttempt(
                started_ms=started_ms, kind="bad", name=None, port=None, verdict="failed", detail=repr(error)
            )
        finally:
            writer.close()
        self._record(attempt)

    async def _handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, started_ms: int, began: float
    ) -> NetworkAttempt:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError) as error:
            return _unread(started_ms, f"no whole HTTP request head ({type(error).__name__})")
        found = core.route(head)
        if isinstance(found, core.Bad):
            await _send(writer, core.bad_response(found))
            return _unread(started_ms, found.reason)
        target = found.target
        kind: Literal["connect", "http"] = "connect" if isinstance(found, core.Tunnel) else "http"
        method = found.method if isinstance(found, core.Forward) else None
        base = NetworkAttempt(
            started_ms=started_ms,
            kind=kind,
            name=target.host.text,
            port=target.port,
            verdict="refused",
            method=method,
        )
        verdict = core.decide(self.rules, target.host, target.port)
        if isinstance(verdict, core.Refuse):
            await _send(writer, core.refused_response(verdict, f"{target.host.text}:{target.port}"))
            return msgspec.structs.replace(base, setting=verdict.setting, detail=verdict.detail)
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(
                asyncio.open_connection(target.host.text, target.port, limit=CHUNK), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as error:
            await _send(writer, _bad_gateway(f"{target.host.text}:{target.port}", error))
            return msgspec.structs.replace(base, verdict="failed", detail=f"could not connect: {error}")
        if isinstance(found, core.Tunnel):
            await _send(writer, b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream_writer.write(found.head)
        sent, received = await asyncio.gather(
            _relay(reader, upstream_writer), _relay(upstream_reader, writer), return_exceptions=True
        )
        upstream_writer.close()
        return msgspec.structs.replace(
            base,
            verdict="allowed",
            sent=(sent if isinstance(sent, int) else 0) + (len(found.head) if isinstance(found, core.Forward) else 0),
            received=received if isinstance(received, int) else 0,
            duration_ms=int((time.monotonic() - began) * 1000),
        )

    def _record(self, attempt: NetworkAttempt) -> None:
        if attempt.verdict == "refused":
            with self._lock:
                self._refused = [*self._refused, attempt][-MAX_REFUSED:]
        try:
            with open(self.log_path, "ab") as out:
                out.write(msgspec.json.encode(attempt) + b"\n")
        except OSError as error:
            log.warning("the network log could not be written: %s", error)


def read_log(path: Path) -> list[NetworkAttempt]:
    """The attempts a session's log holds (a line that does not decode, a torn last one, is left out)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    decoder = msgspec.json.Decoder(NetworkAttempt)
    found = []
    for line in data.splitlines():
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            found.append(decoder.decode(line))
    return found


async def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(OSError):
        writer.write(data)
        await writer.drain()


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """Copy until EOF, then half-close the other side; the bytes copied."""
    total = 0
    try:
        while chunk := await reader.read(CHUNK):
            total += len(chunk)
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()
    return total


def _bad_gateway(target: str, error: BaseException) -> bytes:
    return core.response("502 Bad Gateway", f"eukhe's sandbox proxy could not reach {target}: {error}\n")


def _unread(started_ms: int, why: str) -> NetworkAttempt:
    """The record of a request the proxy would not read."""
    return NetworkAttempt(
        started_ms=started_ms, kind="bad", name=None, port=None, verdict="refused", setting=core.BAD_REQUEST, detail=why
    )


def _short_tmp() -> str:
    """A directory whose socket paths stay within the 108 bytes a Unix socket's path may have."""
    return "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
