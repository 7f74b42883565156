"""`eukhe mcp --http ADDRESS`: the same MCP server over MCP's streamable HTTP transport (docs/mcp.md, "HTTP").

The decisions are the core's (`eukhe.core.mcp_http`): where the server may listen, which connections it takes,
which requests pass the door (the head's size, the Host, the Origin, then the bearer token), where each admitted
request goes. This module is the shell around them: the token, the listening socket, uvicorn, and the connections.

One client connection is one MCP session of the SDK's transport: an `initialize` without a session id opens it, with
an eukhe session of its own (created in `--cwd`) or the one `--session` names, and an `EukheServer` over that
session, exactly as stdio serves one. Each connection has its own `StreamableHTTPSessionManager` (the SDK's
transport, progress and cancellation included), which then holds that one MCP session; its requests are routed to it
by their `Mcp-Session-Id`. A connection ends when its client deletes it (DELETE), when the SDK expires it (30 minutes
with no request in flight and no stream open), or when the server stops; as on stdio its eukhe session stays in the
daemon, and the calls in flight run on there. Each connection keeps the SSE events it sent (`ConnectionEvents`,
bounded by the core's `EventLog`), so a client that lost a stream resumes it with `Last-Event-ID`; with them the SDK
opens each stream of a 2025-11-25 client with a priming event and its `retry`.

Beside that era, the 2026-07-28 one (each request carrying its protocol version, no `initialize`, no session id, one
request and its answer per POST; a client starts with `server/discover`): a request whose `MCP-Protocol-Version`
header is not a revision of the handshake goes to one more `StreamableHTTPSessionManager`, whose SDK entry for that
era serves it, over one eukhe session for all of them (the `--session` one, or one created in `--cwd` at the first
such request). In that era a client cancels a call by closing its stream: the door sees it leave and marks the
call's cancel as the client's (`cancel_on_leave`), so its job is cancelled in the daemon, as on
`notifications/cancelled`; a stop leaves it to the daemon.

Bounds on what a client sends (uvicorn keeps none of them but a keep-alive timeout between requests; the shell's
are in `ServedH11Protocol`, the decisions in the core): a new connection past its peer's bound or the total takes the
place of an idle one, else is refused (429, 503); a request's head is at most MAX_HEAD_BYTES and MAX_HEADER_FIELDS
(431); every request must arrive whole (its headers and body) within REQUEST_ARRIVAL_S of its first byte (of the
connection, for its first request), else the connection is closed; a POST body is at most MAX_BODY_BYTES (413),
counted as it comes when it has no Content-Length; a body without a session id that is not JSON (bad UTF-8, bad
syntax, nested or numbered past the SDK's parser's bounds) is a JSON-RPC parse error, as the SDK answers one with a
session id. Every refusal is a JSON-RPC error in the body and a line on stderr.

SIGINT and SIGTERM stop the server: no new requests, every connection closed (a call in flight is left to the daemon:
a shutdown is not a cancel), then uvicorn lets the open HTTP connections end, at most GRACE_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import secrets
import signal
import socket
import stat
import struct
from collections.abc import Awaitable, Callable, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import h11
import mcp_types as types
import pydantic_core
import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from eukhe.calls.texts import error_text
from eukhe.core.mcp_events import EventLog
from eukhe.core.mcp_http import (
    ERROR_CODES,
    INVALID_REQUEST,
    MAX_HEAD_BYTES,
    MCP_METHODS,
    MESSAGES,
    PLACEMENT_MESSAGES,
    REASONS,
    RETRY_AFTER_S,
    STATUS,
    STATUS_OF_PLACEMENT,
    STATUS_OF_ROUTE,
    Body,
    HostRule,
    ListenRefusal,
    Open,
    Placement,
    Route,
    SessionFact,
    TcpListen,
    UnixListen,
    Verdict,
    admit,
    body_of,
    era_of,
    head_of,
    host_rule,
    peer_of_address,
    place,
    plan_listen,
    route,
)
from eukhe.core.own_secrets import MCP_TOKEN
from eukhe.daemon.client import connect
from eukhe.errors import EukheError, UsageError, error_code
from eukhe.mcp.link import DaemonLink
from eukhe.mcp.server import EukheServer, Serving, Target, configure_logging, open_session, serving_of
from eukhe.mcp.stdio import MAX_LINE_BYTES
from eukhe.paths import agent_dir
from eukhe.private_fs import create_private_file, make_private_dirs

log = logging.getLogger("eukhe.mcp")

TOKEN_ENV = MCP_TOKEN  # one of eukhe's own secrets: never passed on to the daemon, a job or a kernel
"""The bearer token, when set; else the token file's."""
TOKEN_FILE = "mcp-token"
"""The token file's name in the agent dir: made once (0600) and kept, so clients configured with it go on working."""
TOKEN_BYTES = 32
"""Random bytes in a generated token (URL-safe base64)."""
MAX_BODY_BYTES = MAX_LINE_BYTES
"""Longest request body read (64 MiB, as a message on stdio); a longer one is refused with 413 before it is read."""
REQUEST_ARRIVAL_S = 15.0
"""How long a request may take to arrive whole, its headers and body, from its first byte (the connection's start,
for its first request); past it the connection is closed."""
REFUSAL_LINGER_S = 2.0
"""How long a connection answered and closed here (a refusal) goes on reading and dropping what its client still
sends, so the client reads the answer before the connection is reset."""
MAX_LINGERING = 64
"""Most such connections at once; past it a refused connection is closed with no answer (a flood gets none)."""
GRACE_S = 5.0
"""At a stop, how long the open HTTP connections may take to end once their MCP sessions are closed."""
MAX_EVENTS = 4096
"""Most SSE events a connection keeps for a client that resumes a stream; the oldest go first."""
MAX_EVENT_BYTES = 16 << 20
"""Most bytes of messages a connection keeps for a client that resumes a stream (the newest event is always kept)."""
RETRY_MS = 1000
"""The `retry` of each stream's priming event: how long a client that lost the stream waits to resume it."""
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


class McpTokenError(EukheError):
    """The bearer token could not be had: an empty EUKHE_MCP_TOKEN, or a token file that is not a private regular
    file of this user, is empty, or cannot be read or made."""

    code = "mcp_token_error"

    def __init__(self, message: str, path: Path | None) -> None:
        super().__init__(message)
        self.path = path


class HttpBindError(EukheError):
    """The listening socket could not be bound (the address is taken, not this machine's, or not allowed)."""

    code = "socket_bind_failed"

    def __init__(self, message: str, address: str) -> None:
        super().__init__(message)
        self.address = address


# ---- the token ----------------------------------------------------------------------------------------------


def token_path() -> Path:
    """`<agent dir>/mcp-token`."""
    return agent_dir() / TOKEN_FILE


def load_token(environ: dict[str, str] | os._Environ[str] = os.environ) -> tuple[str, str]:
    """The bearer token and where it comes from (said at start; the token itself never is): EUKHE_MCP_TOKEN when set,
    else the token file, generated on first use."""
    if TOKEN_ENV in environ:
        token = environ[TOKEN_ENV].strip()
        if not token:
            raise McpTokenError(f"{TOKEN_ENV} is set but empty: set a token, or unset it to use the token file", None)
        return token, f"from {TOKEN_ENV}"
    path = token_path()
    return read_or_make_token(path), f"in {path} (mode 0600)"


def read_or_make_token(path: Path) -> str:
    """The token in `path`; a new random one written there first when there is none (two servers starting together
    agree on one: the file appears whole, by a hard link, or not at all)."""
    make_private_dirs(path.parent)
    for _ in range(2):
        try:
            return read_token_file(path)
        except FileNotFoundError:
            pass
        with contextlib.suppress(FileExistsError):
            write_token_file(path, secrets.token_urlsafe(TOKEN_BYTES))
    return read_token_file(path)


def read_token_file(path: Path) -> str:
    """The token a token file holds, refused when others could read or replace it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise McpTokenError(f"cannot read the token file {path}: {error.strerror}", path) from error
    with os.fdopen(fd, "rb") as file:
        facts = os.fstat(file.fileno())
        if not stat.S_ISREG(facts.st_mode) or facts.st_uid != os.getuid() or facts.st_mode & 0o077:
            raise McpTokenError(
                f"the token file {path} is not a private file of yours (mode {stat.filemode(facts.st_mode)}): "
                "remove it to have a new one made, or `chmod 600` it",
                path,
            )
        token = file.read(4096).decode("utf-8", "surrogateescape").strip()
    if not token:
        raise McpTokenError(f"the token file {path} is empty: remove it to have a new one made", path)
    return token


def write_token_file(path: Path, token: str) -> None:
    """Write a new token file (0600 from its creation); FileExistsError when another process made one first."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = create_private_file(scratch)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(token.encode() + b"\n")
            file.flush()
            os.fsync(file.fileno())
        os.link(scratch, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)


# ---- the listening socket -----------------------------------------------------------------------------------


def listen_plan(text: str, *, allow_remote: bool) -> TcpListen | UnixListen:
    """Where `--http TEXT` listens; a refusal is a usage error naming why (and --allow-remote, for a remote host)."""
    plan = plan_listen(text, allow_remote=allow_remote)
    if isinstance(plan, ListenRefusal):
        raise UsageError(plan.message)
    return plan


def bind(plan: TcpListen | UnixListen) -> tuple[socket.socket, str]:
    """The listening socket and where it listens, as clients reach it (the port the system picked for port 0)."""
    if isinstance(plan, UnixListen):
        return bind_unix(Path(os.path.abspath(plan.path))), f"unix:{os.path.abspath(plan.path)}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            plan.host, plan.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise HttpBindError(f"cannot listen on {plan.host}:{plan.port}: {error}", f"{plan.host}:{plan.port}") from error
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise HttpBindError(f"cannot listen on {plan.host}:{plan.port}: {error.strerror}", plan.url()) from error
    return sock, plan.url(port=sock.getsockname()[1])


def bind_unix(path: Path) -> socket.socket:
    """A unix socket at `path`, 0600 from its creation (a stale socket there, whose server is gone, is replaced)."""
    if path.is_socket():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()
        except OSError:
            pass
        else:
            raise HttpBindError(f"cannot listen on unix:{path}: another server answers there", f"unix:{path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # the socket's mode is set at its creation: no moment when others could connect
    try:
        sock.bind(str(path))
        sock.listen(128)
    except OSError as error:
        sock.close()
        reason = "the path is taken" if error.errno == errno.EADDRINUSE else error.strerror
        raise HttpBindError(f"cannot listen on unix:{path}: {reason}", f"unix:{path}") from error
    finally:
        os.umask(previous)
    return sock


# ---- the endpoint -------------------------------------------------------------------------------------------


class ConnectionEvents(EventStore):
    """A connection's SSE events, kept so a client that lost a stream resumes it (`Last-Event-ID`); the core's
    bounded log decides what is kept and replayed (`eukhe.core.mcp_events`). With it the SDK opens each stream of a
    2025-11-25 client with a priming event (an id, no data) and the `retry` to wait before reconnecting."""

    def __init__(self) -> None:
        self.log: EventLog[str] = EventLog(MAX_EVENTS, MAX_EVENT_BYTES)
        self.prefix = secrets.token_hex(4)  # another connection's event ids are not this one's

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        text = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        return self.event_id(self.log.append(stream_id, text, len(text or "")))

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        prefix, _, number = last_event_id.rpartition("-")
        replay = self.log.after(int(number)) if prefix == self.prefix and number.isdigit() else None
        if replay is None:
            return None
        for event in replay.events:  # the core replays messages only, never a priming event
            message = types.jsonrpc_message_adapter.validate_json(event.message or "", by_name=False)
            await send_callback(EventMessage(message, self.event_id(event.number)))
        return replay.stream

    def event_id(self, number: int) -> str:
        return f"{self.prefix}-{number}"


class Connection:
    """One client connection: its session, and the SDK's session manager that holds its one MCP session. (The
    per-request era's requests are served as one such connection that has no session id.)"""

    def __init__(self, name: str, target: Target, manager: StreamableHTTPSessionManager) -> None:
        self.name = name
        self.target = target
        self.manager = manager
        self.session_id: str | None = None
        self.done = anyio.Event()

    def __str__(self) -> str:
        return f"{self.name} (session {self.target.session})"


CLIENT_LEFT = "eukhe.client_left"
"""In the ASGI scope of a per-request era request: the cancel flags of the calls it runs, set when its client
leaves (`cancel_on_leave`)."""


async def cancel_on_leave(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """In the per-request era a client cancels a request by closing its stream (2026-07-28, "Cancellation"), where
    the handshake era sends `notifications/cancelled`: the request's own cancel flag (`cancel_requested`, what
    `peer_cancelled` reads) is handed to the door, which sets it when the client leaves, before the SDK cancels
    the handler. A stop is not a cancel: then the door leaves it unset and the call runs on in the daemon."""
    request = ctx.request
    flags = request.scope.get(CLIENT_LEFT) if isinstance(request, Request) else None
    flag = getattr(getattr(ctx.session, "_request_outbound", None), "cancel_requested", None)
    if isinstance(flags, list) and isinstance(flag, anyio.Event):
        flags.append(flag)
    return await call_next(ctx)


Opener = Callable[[], Awaitable[Target]]


class Endpoint:
    """The ASGI application: the door, the routing, and the connections."""

    def __init__(
        self,
        link: DaemonLink,
        token: str,
        opener: Opener,
        group: anyio.abc.TaskGroup,
        serving: Serving,
        *,
        hosts: HostRule | None = None,
    ) -> None:
        self.link = link
        self.serving = serving
        self.token = token
        self.hosts = hosts  # None: a unix socket, where no Host is checked
        self.opener = opener
        self.group = group
        self.connections: dict[str, Connection] = {}
        self.live: set[Connection] = set()
        self.opened = 0
        self.closing = False
        self.per_request: Connection | None = None  # made at the first request of that era
        self.per_request_made = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = first_headers(scope)
        query = scope["query_string"]
        target = scope["raw_path"] + (b"?" + query if query else b"")
        verdict = admit(
            head=head_of(scope["method"].encode("latin-1"), target, scope["headers"]),
            host=headers.get("host"),
            hosts=self.hosts,
            origin=headers.get("origin"),
            authorization=headers.get("authorization"),
            token=self.token,
        )
        if verdict is not Verdict.ADMITTED:
            given = f" (Host {headers.get('host', '')[:200]!r})" if verdict is Verdict.BAD_HOST else ""
            log.info("refused %s %s: %s%s", scope["method"], scope["path"], verdict.value, given)
            challenge = [(b"www-authenticate", www_authenticate(verdict))] if STATUS[verdict] == 401 else []
            await respond(send, STATUS[verdict], REASONS[verdict], challenge)
            return
        if self.closing:
            await respond(send, 503, "the server is stopping")
            return
        session_id = headers.get(SESSION_HEADER)
        known = session_id is not None and session_id in self.connections
        fact = SessionFact.NONE if session_id is None else SessionFact.KNOWN if known else SessionFact.UNKNOWN
        body = b""
        if scope["method"] == "POST":  # every body is bounded here; the SDK's own bound is set above this one
            try:
                read = await read_body(receive, declared_length(headers), MAX_BODY_BYTES)
            except ClientGoneError:
                return
            if read is None:
                log.info("refused %s %s: the body is over %d bytes", scope["method"], scope["path"], MAX_BODY_BYTES)
                await respond(send, 413, f"the request body is over {MAX_BODY_BYTES} bytes (64 MiB)")
                return
            body = read
            receive = replayed(body, receive)
        kind, unparsable = body_kind(body)
        era = era_of(headers.get(VERSION_HEADER), HANDSHAKE_PROTOCOL_VERSIONS)
        where = route(path=scope["path"], method=scope["method"], session=fact, body=kind, era=era)
        if where is Route.FORWARD:
            assert session_id is not None
            await self.forward(self.connections[session_id], scope, receive, send)
        elif where is Route.OPEN:
            await self.open(scope, body, receive, send)
        elif where is Route.PER_REQUEST:
            await self.serve_per_request(scope, body, receive, send)
        else:
            allow = [(b"allow", ", ".join(MCP_METHODS).encode())] if where is Route.NOT_ALLOWED else []
            message = f"{MESSAGES[where]} ({unparsable})" if where is Route.PARSE_ERROR else MESSAGES[where]
            await respond(send, STATUS_OF_ROUTE[where], message, allow, code=ERROR_CODES[where])

    async def forward(self, connection: Connection, scope: Scope, receive: Receive, send: Send) -> None:
        """A request of a connection, to its session manager; the connection ends when its MCP session does."""
        status = 0
        if connection.done.is_set():  # it ended while this request waited for its turn
            await respond(send, STATUS_OF_ROUTE[Route.UNKNOWN_SESSION], MESSAGES[Route.UNKNOWN_SESSION])
            return

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await connection.manager.handle_request(scope, receive, watched)
        if status == 404 or (scope["method"] == "DELETE" and 200 <= status < 300):
            self.end(connection, "deleted by its client" if scope["method"] == "DELETE" else "expired")

    async def open(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """An initialize: a new connection with its session; it lives once the SDK gave it a session id."""
        self.opened += 1
        connection = await self.connect(f"connection {self.opened}", body, send)
        if connection is None:
            return
        target = connection.target

        async def registered(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                given = dict(message.get("headers") or []).get(SESSION_HEADER.encode())
                if given is not None and not self.closing:
                    connection.session_id = given.decode("latin-1")
                    self.connections[connection.session_id] = connection
                    log.info("%s: working directory %s", connection, target.cwd)
            await send(message)

        try:
            await connection.manager.handle_request(scope, receive, registered)
        finally:
            if connection.session_id is None:
                self.end(connection, "its initialize was refused")

    async def serve_per_request(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """A request of the per-request era, to the server's one MCP server of that era, on its one session (made at
        the first such request); its client leaving cancels the calls it runs (`cancel_on_leave`)."""
        async with self.per_request_made:
            if self.per_request is None:
                self.per_request = await self.connect("the 2026-07-28 requests", body, send, cancel_on_leave)
                if self.per_request is None:
                    return
                log.info("%s: working directory %s", self.per_request, self.per_request.target.cwd)
        flags: list[anyio.Event] = []

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not self.closing:
                for flag in flags:
                    flag.set()
            return message

        await self.per_request.manager.handle_request({**scope, CLIENT_LEFT: flags}, watched, send)

    async def connect(
        self, name: str, body: bytes, send: Send, *middleware: ServerMiddleware[Any]
    ) -> Connection | None:
        """A new connection named `name`, its session opened and its session manager running; None when the
        daemon gave no session (a 503 answers the request, whose `body` names its id)."""
        try:
            target = await self.opener()
        except (EukheError, OSError) as error:
            code = error_code(error) if isinstance(error, EukheError) else "daemon_unavailable"
            log.warning("%s has no session: %s", name, error)
            await respond(send, 503, error_text(code, str(error)), request_id=request_id_of(body))
            return None
        # The server's instructions read the skills on disk: off the event loop, as the session was opened.
        server = await anyio.to_thread.run_sync(lambda: EukheServer(self.link, target, self.serving).sdk_server())
        server.middleware.extend(middleware)
        manager = StreamableHTTPSessionManager(
            server, ConnectionEvents(), retry_interval=RETRY_MS, max_request_body_size=MAX_BODY_BYTES
        )
        connection = Connection(name, target, manager)
        await self.group.start(self.run_connection, connection)
        return connection

    async def run_connection(self, connection: Connection, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Run a connection's session manager until the connection ends (its MCP session is then closed)."""
        self.live.add(connection)
        try:
            async with connection.manager.run():
                task_status.started()
                await connection.done.wait()
        finally:
            self.live.discard(connection)

    def end(self, connection: Connection, why: str) -> None:
        """End a connection: it is forgotten now, and its session manager closes its MCP session."""
        if connection.session_id is not None and self.connections.get(connection.session_id) is connection:
            del self.connections[connection.session_id]
            log.info("%s ended: %s; the session stays in the daemon", connection, why)
        connection.done.set()

    def close(self) -> None:
        """Stop: refuse new requests, end every connection."""
        self.closing = True
        for connection in list(self.live):
            self.end(connection, "the server stops")


def first_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name, the first of each (UTF-8, undecodable bytes kept as escapes)."""
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        found.setdefault(name.decode("latin-1").lower(), value.decode("utf-8", "surrogateescape"))
    return found


def www_authenticate(verdict: Verdict) -> bytes:
    """The challenge of a 401 (RFC 6750 3): a wrong token is `invalid_token`, no token just the scheme."""
    if verdict is Verdict.NO_TOKEN:
        return b'Bearer realm="eukhe"'
    return b'Bearer realm="eukhe", error="invalid_token"'


def parse_json(body: bytes) -> object:
    """A body's JSON value, read by the SDK's own parser (pydantic-core's, as its transport reads every POST): its
    nesting is bounded and every refusal (bad UTF-8, bad syntax, too deep, a number out of range) is a ValueError,
    so the door and the SDK agree on what parses."""
    return pydantic_core.from_json(body)


def body_kind(body: bytes) -> tuple[Body, str | None]:
    """What a request body is, for routing (not JSON, an initialize request, or anything else), and the parser's
    words when it is not JSON."""
    try:
        message = parse_json(body)
    except ValueError as error:
        return Body.UNPARSABLE, str(error)
    return body_of(message), None


def request_id_of(body: bytes) -> Any:
    """The JSON-RPC id of a request body (None when it has none, or is not JSON)."""
    try:
        message = parse_json(body)
    except ValueError:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None


async def respond(
    send: Send,
    status: int,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    request_id: Any = None,
    code: int | None = None,
) -> None:
    """Answer a request here: the status, and a JSON-RPC error saying why (what MCP clients read); its code is
    `code`, else Invalid Request for a 4xx and Internal Error for a 5xx."""
    body = error_body(status, message, request_id=request_id, code=code)
    start_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start_headers + (headers or [])})
    await send({"type": "http.response.body", "body": body})


def error_body(status: int, message: str, *, request_id: Any = None, code: int | None = None) -> bytes:
    """A JSON-RPC error saying why (`code`, else Invalid Request for a 4xx and Internal Error for a 5xx)."""
    code = code if code is not None else INVALID_REQUEST if status < 500 else types.INTERNAL_ERROR
    error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
    return error.model_dump_json(by_alias=True, exclude_unset=True).encode()


def raw_answer(status: int, message: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> bytes:
    """A whole answer, written as is where no request reached the application (a connection refused, a request
    that never arrived whole or is not HTTP): the status, `connection: close`, and a JSON-RPC error saying why."""
    body = error_body(status, message)
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode(),
        b"content-type: application/json",
        b"content-length: %d" % len(body),
        b"connection: close",
        *(name + b": " + value for name, value in headers),
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class ClientGoneError(Exception):
    """The client disconnected before its request body arrived whole."""


def declared_length(headers: dict[str, str]) -> int | None:
    """The body's length as its Content-Length header says (None without one; h11 refused a malformed one)."""
    given = headers.get("content-length")
    return int(given) if given is not None and given.isascii() and given.isdigit() else None


async def read_body(receive: Receive, declared: int | None, limit: int) -> bytes | None:
    """The whole request body, or None past `limit` bytes (said by its Content-Length before anything is read);
    ClientGoneError when the client leaves first."""
    if declared is not None and declared > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGoneError()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replayed(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then what the client sends next (its disconnect)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


# ---- serving ------------------------------------------------------------------------------------------------


class Connections:
    """The open connections, oldest first, each with its peer (what `place` decides on), and how many refused
    ones still linger (`ServedH11Protocol.refuse`)."""

    def __init__(self) -> None:
        self.open: dict[ServedH11Protocol, str] = {}  # insertion order: the order they opened
        self.lingering = 0

    def place(self, protocol: ServedH11Protocol, peer: str) -> Placement:
        """Place a new connection (`core.mcp_http.place`): accepted, in place of an idle one (closed here), or
        refused (the caller answers it)."""
        members = list(self.open.items())
        decided = place(peer, [Open(other, member.idle()) for member, other in members])
        if decided.placement is Placement.EVICT:
            assert decided.victim is not None
            victim, victims_peer = members[decided.victim]
            log.info("closed an idle connection from %s to make room for one from %s", victims_peer, peer)
            self.forget(victim)
            victim.evict()
        if decided.placement in (Placement.ACCEPT, Placement.EVICT):
            self.open[protocol] = peer
        return decided.placement

    def forget(self, protocol: ServedH11Protocol) -> None:
        self.open.pop(protocol, None)


class ServingConfig(uvicorn.Config):
    """uvicorn's config, with the server's open connections (each new one is placed among them)."""

    def __init__(self, *args: Any, connections: Connections, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections = connections


class HeadBoundConnection(h11.Connection):
    """h11's server connection, its heads bounded by MAX_HEAD_BYTES, remembering the error that refused the peer
    (its `error_status_hint` is 431 when a head grew past the bound before it was whole)."""

    def __init__(self) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.refusal: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as error:
            self.refusal = error
            raise


class ServedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the bounds uvicorn does not keep.

    - Connections: each new one is placed among the open ones (`Connections.place`); one refused is answered 429 or
      503 with `Retry-After` before anything of it is read, and closed (`refuse`).
    - Heads: h11 refuses a head that grows past MAX_HEAD_BYTES before it is whole; that refusal is a 431 here
      (uvicorn's would be a 400), any other h11 refusal a 400, each with a JSON-RPC error. (A head that arrives
      whole in one read is measured by the door: `core.mcp_http.admit`.)
    - Arrival: each request must arrive whole (its headers and its body) within REQUEST_ARRIVAL_S from its first
      byte, or from the connection's start for its first request. Past it the connection is closed: with a 408
      when the headers never came whole (no response was started), else at once (the application reading the body
      sees the client gone). Between requests uvicorn's own keep-alive timeout holds; a request that arrived whole
      is never timed, however long its response streams.

    Every answer written here says `connection: close`, and the connection then lingers (`refuse`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn: HeadBoundConnection = HeadBoundConnection()
        self.arrival: asyncio.TimerHandle | None = None
        self.linger: asyncio.TimerHandle | None = None
        self.refused = False  # answered here: what the client sends now is dropped
        self.peer = ""

    @property
    def table(self) -> Connections:
        config = self.config
        assert isinstance(config, ServingConfig)
        return config.connections

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.peer = peer_of(transport)
        placement = self.table.place(self, self.peer)
        if placement in STATUS_OF_PLACEMENT:
            log.info("refused a connection from %s: %s", self.peer, placement.value)
            retry = [(b"retry-after", str(RETRY_AFTER_S).encode())]
            self.refuse(STATUS_OF_PLACEMENT[placement], PLACEMENT_MESSAGES[placement], retry)
            return
        self.arm()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.arriving():  # the first byte of a request (after a keep-alive wait) starts its clock
            self.arm()
        super().data_received(data)
        if not self.arriving():
            self.disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self.table.forget(self)
        if self.linger is not None:
            self.linger.cancel()
            self.linger = None
            self.table.lingering -= 1
        super().connection_lost(exc)

    def shutdown(self) -> None:
        if self.refused:
            self.transport.close()
            return
        super().shutdown()

    def send_400_response(self, msg: str) -> None:
        """h11 refused what the client sent: 431 for a head past the bound, else 400 (uvicorn's own answer would be
        a 400 in plain text for both)."""
        error = self.conn.refusal
        status = error.error_status_hint if error is not None else 400
        if status == STATUS[Verdict.HEAD_TOO_LARGE]:
            message = REASONS[Verdict.HEAD_TOO_LARGE]
        else:
            message = f"the request is not HTTP/1.1 this server reads: {error or msg}"
        log.info("refused a request from %s: %s", self.peer, message)
        self.refuse(status, message)

    def idle(self) -> bool:
        """Whether no request is in hand: none came yet, its head is still arriving, or the last one is answered."""
        return not self.refused and self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE

    def evict(self) -> None:
        """Close this idle connection, to make room for a new one."""
        self.disarm()
        self.transport.close()

    def refuse(self, status: int, message: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Answer `status` here and close: the answer written, the writing side shut, and what the client still
        sends read and dropped until it closes, or for REFUSAL_LINGER_S (closed at once, its unread bytes would
        reset the connection, and the client could lose the answer). Past MAX_LINGERING such connections, one is
        closed with no answer."""
        self.disarm()
        self.table.forget(self)
        self.refused = True
        if self.table.lingering >= MAX_LINGERING:
            self.transport.abort()
            return
        self.transport.write(raw_answer(status, message, headers))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.table.lingering += 1
        self.linger = self.loop.call_later(REFUSAL_LINGER_S, self.transport.close)

    def arriving(self) -> bool:
        """Whether a request is still on its way: its headers (IDLE) or its body (SEND_BODY) not yet whole."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def arm(self) -> None:
        if self.arrival is None:
            self.arrival = self.loop.call_later(REQUEST_ARRIVAL_S, self.too_slow)

    def disarm(self) -> None:
        if self.arrival is not None:
            self.arrival.cancel()
            self.arrival = None

    def too_slow(self) -> None:
        """The request did not arrive in time: close the connection (a 408 says why, when nothing was answered)."""
        self.arrival = None
        if self.transport.is_closing() or not self.arriving():
            return
        log.info("closed a connection whose request did not arrive whole within %.0f s", REQUEST_ARRIVAL_S)
        if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
            self.refuse(408, f"the request did not arrive whole within {REQUEST_ARRIVAL_S:.0f} s")
        else:
            self.transport.close()


def peer_of(transport: asyncio.BaseTransport) -> str:
    """Whom a connection is from, for its bound: the peer's IP address over TCP (`core.mcp_http.peer_of_address`),
    its process on a unix socket (SO_PEERCRED)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return "a unix socket peer"
        return f"process {struct.unpack('3i', credentials)[0]}"
    peer = transport.get_extra_info("peername")
    return peer_of_address(str(peer[0])) if isinstance(peer, tuple) and peer else "an unknown peer"


class Uvicorn(uvicorn.Server):
    """uvicorn, without its own signal handlers: `serve_http` stops it (uvicorn's would raise the signal again once
    it stopped, and the process would die of it instead of exiting)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


async def serve_http(
    link: DaemonLink,
    sock: socket.socket,
    token: str,
    opener: Opener,
    serving: Serving,
    *,
    hosts: HostRule | None,
) -> None:
    """Serve streamable HTTP on `sock` until SIGINT or SIGTERM (`hosts`: the Host rule of its listener)."""
    async with anyio.create_task_group() as group:
        endpoint = Endpoint(link, token, opener, group, serving, hosts=hosts)
        config = ServingConfig(
            endpoint,
            connections=Connections(),
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            ws="none",
            http=ServedH11Protocol,
            server_header=False,
            timeout_graceful_shutdown=int(GRACE_S),
        )
        server = Uvicorn(config)

        async def stop_on_signal(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                task_status.started()
                async for number in signals:
                    log.info("%s: stopping", signal.Signals(number).name)
                    endpoint.close()
                    server.should_exit = True

        await group.start(stop_on_signal)  # the handlers are in place before the first request
        try:
            await server.serve(sockets=[sock])
        finally:
            endpoint.close()
            group.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await link.aclose()


def run_http(
    socket_path: str,
    address: str,
    *,
    allow_remote: bool,
    cwd: str | None,
    session: str | None,
    sandbox: dict[str, Any] | None = None,
    structured: bool = False,
) -> int:
    """`eukhe mcp --http ADDRESS`: serve until SIGINT or SIGTERM; the exit code."""
    configure_logging()
    serving = serving_of(structured)
    plan = listen_plan(address, allow_remote=allow_remote)
    token, token_source = load_token()
    with connect(socket_path) as client:  # the daemon answers (started if need be), and a named session exists
        named = open_session(client, cwd=cwd, session=session, sandbox=sandbox) if session is not None else None

    def open_target() -> Target:
        if named is not None:
            with connect(socket_path) as client:  # reopened by the daemon if it was closed meanwhile
                return open_session(client, cwd=None, session=named.session)
        with connect(socket_path) as client:
            return open_session(client, cwd=cwd, session=None, sandbox=sandbox)

    async def opener() -> Target:
        return await anyio.to_thread.run_sync(open_target)

    sock, where = bind(plan)
    serves = (
        f"session {named.session}"
        if named is not None
        else "a new session for each connection, and one for every 2026-07-28 request"
    )
    if isinstance(plan, TcpListen) and not plan.loopback:
        log.warning("listening beyond this machine (--allow-remote): anyone who has the token runs commands as you")
    log.info("listening on %s (%s); bearer token %s", where, serves, token_source)
    try:
        hosts = host_rule(plan, [socket.gethostname()])
        anyio.run(functools.partial(serve_http, DaemonLink(socket_path), sock, token, opener, serving, hosts=hosts))
    finally:
        sock.close()
        if isinstance(plan, UnixListen):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where[len("unix:") :])
    log.info("stopped; the sessions stay in the daemon")
    return 0
