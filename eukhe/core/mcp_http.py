"""The decisions of `eukhe mcp --http`: where it may listen, which requests it admits, where each one goes.

Rules, all in this file:
- Listening (`plan_listen`): `--http` is `HOST:PORT` (`[V6]:PORT` for an IPv6 address) or `unix:PATH`. A host that
  is not loopback (`localhost`, 127.0.0.0/8, ::1) is refused unless `--allow-remote`: the server runs commands as
  its user, so by default only this machine reaches it. A unix socket is local by construction.
- Admission (`admit`), in this order, before anything else reads the request:
  1. a head (request line and header fields) over MAX_HEAD_BYTES bytes, or with over MAX_HEADER_FIELDS fields, is
     refused with 431 (Request Header Fields Too Large, RFC 6585 5);
  2. on a TCP listener, a `Host` that is missing, malformed, or names a host the listener is not (`host_allowed`)
     is refused with 403. DNS rebinding: a web page on a name its attacker points at 127.0.0.1 reaches the server
     with its own name in `Host` (and maybe no `Origin`, for a simple request); the name is what is checked, the
     port never (it says nothing of rebinding, and a tunnel, a port mapping or a proxy on another port changes
     it). A loopback listener takes loopback hosts only (`localhost`, 127.0.0.0/8, ::1); one beyond loopback
     (`--allow-remote`) also any IP address (a page whose address is in the URL is that address's own: nothing
     rebinds) and the names it was told (the host it binds, the machine's own name). A unix socket listener checks
     no `Host`: no browser connects to a unix socket;
  3. an `Origin` that is present and not a loopback origin (`http(s)://localhost|127.x|[::1][:port]`) is refused
     with 403: a web page the user visits must not drive the server through DNS rebinding (MCP's streamable HTTP
     transport, "Security Warning"). No `Origin` is what a non-browser client sends, and is admitted;
  4. every request carries `Authorization: Bearer TOKEN` with the server's token, compared in constant time; no
     header, another scheme or another token is refused with 401.
- Connections (`place`), before a connection's first byte is read: at most MAX_CONNECTIONS_PER_PEER open
  connections (the transport's, TCP or unix socket: not MCP sessions) from one peer (its IP address, the port
  never; on a unix socket, its process) and MAX_CONNECTIONS in all. A new connection past either bound takes the
  place of an idle one (no request in hand: none yet, one whose head is still arriving, or between two) of the
  same peer, or, past the total, of the peer holding the most connections; with none idle it is refused: 429 past
  its peer's bound, 503 past the total, each with `Retry-After`.
- Routing (`route`): another path than the endpoint's is a 404. Then the era: a request whose `MCP-Protocol-Version`
  header names no revision of the `initialize` handshake (`era_of`: 2026-07-28, or a value no revision has) is of
  the per-request era, and goes to the server's one MCP server of that era whatever its method or session id (that
  era has no sessions; the SDK's entry for it answers a method other than POST, or a version it does not serve, as
  the specification says). Then the table ROUTES: a request with a session id this server gave goes to that
  connection; an `initialize` without one opens a new connection (its own eukhe session, or the one `--session`
  names); a body without one that is not JSON at all is a JSON-RPC parse error (-32700, HTTP 400), any other request
  without one a 400, an unknown session id a 404 (the client starts over), another method a 405. Every answer the
  server gives itself is a JSON-RPC error: -32700 for a body that does not parse, -32600 (Invalid Request) for the
  rest (`ERROR_CODES`; JSON-RPC 2.0, section 5.1).
"""

from __future__ import annotations

import enum
import hmac
import ipaddress
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

ENDPOINT = "/mcp"
"""The one path the server answers on."""

MAX_PORT = 65535

MAX_HEAD_BYTES = 16 << 10
"""Longest head, its request line and header fields as on the wire (h11's default bound, and Node's): 16 KiB."""
MAX_HEADER_FIELDS = 100
"""Most header fields in one request (Apache's LimitRequestFields); an MCP client sends about ten."""


# ---- listening ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TcpListen:
    """Listen on a TCP address (port 0: one the system picks)."""

    host: str
    port: int
    loopback: bool

    def url(self, port: int | None = None) -> str:
        """The endpoint's URL on this address (with `port` when the system picked it)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}{ENDPOINT}"


@dataclass(frozen=True, slots=True)
class UnixListen:
    """Listen on a unix socket at `path`."""

    path: str


class ListenReason(enum.Enum):
    """Why an `--http` value was refused."""

    MALFORMED = "malformed"  # neither HOST:PORT, [V6]:PORT nor unix:PATH
    BAD_PORT = "bad_port"  # the port is not a number from 0 to 65535
    REMOTE = "remote"  # a host that is not loopback, without --allow-remote


@dataclass(frozen=True, slots=True)
class ListenRefusal:
    """An `--http` value refused, with the words to show."""

    reason: ListenReason
    message: str


HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*\.?")
"""A DNS host name (labels of letters, digits and hyphens)."""


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 without brackets) is this machine: `localhost`, 127.0.0.0/8,
    ::1 (also as an IPv4-mapped address)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def valid_host(host: str) -> bool:
    """An IP address or a DNS host name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return HOST_NAME.fullmatch(host) is not None and len(host) <= 253
    return True


def plan_listen(text: str, *, allow_remote: bool) -> TcpListen | UnixListen | ListenRefusal:
    """Where `--http TEXT` listens, or why not."""
    if text.startswith("unix:"):
        path = text[len("unix:") :]
        if not path or "\0" in path:
            return ListenRefusal(ListenReason.MALFORMED, f"--http {text!r}: unix: needs a socket path (unix:PATH)")
        return UnixListen(path)
    host, colon, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ":" not in host:
            return ListenRefusal(ListenReason.MALFORMED, f"--http {text!r}: brackets hold an IPv6 address only")
    elif ":" in host:
        return ListenRefusal(ListenReason.MALFORMED, f"--http {text!r}: write an IPv6 address in brackets, [::1]:PORT")
    if not colon or not host or not valid_host(host):
        return ListenRefusal(ListenReason.MALFORMED, f"--http {text!r}: expected HOST:PORT, [IPV6]:PORT or unix:PATH")
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > MAX_PORT:
        return ListenRefusal(ListenReason.BAD_PORT, f"--http {text!r}: the port must be a number from 0 to {MAX_PORT}")
    loopback = is_loopback_host(host)
    if not loopback and not allow_remote:
        return ListenRefusal(
            ListenReason.REMOTE,
            f"--http {text!r}: {host} is not a loopback address; the server runs commands as you, so it listens on "
            "this machine only (127.0.0.1, ::1, localhost) unless --allow-remote says otherwise",
        )
    return TcpListen(host=host, port=int(port_text), loopback=loopback)


# ---- admission ----------------------------------------------------------------------------------------------


class Verdict(enum.Enum):
    """What becomes of a request at the door."""

    ADMITTED = "admitted"  # on to the routing
    HEAD_TOO_LARGE = "head_too_large"  # a request line and header fields over MAX_HEAD_BYTES or MAX_HEADER_FIELDS
    BAD_HOST = "bad_host"  # on a TCP listener, a Host header missing, malformed, or not a host of the listener's
    BAD_ORIGIN = "bad_origin"  # an Origin header that is not a loopback origin
    NO_TOKEN = "no_token"  # no Authorization header
    NOT_BEARER = "not_bearer"  # an Authorization header of another scheme, or with no credentials
    WRONG_TOKEN = "wrong_token"  # a bearer token that is not the server's


STATUS: dict[Verdict, int] = {
    Verdict.ADMITTED: 200,
    Verdict.HEAD_TOO_LARGE: 431,
    Verdict.BAD_HOST: 403,
    Verdict.BAD_ORIGIN: 403,
    Verdict.NO_TOKEN: 401,
    Verdict.NOT_BEARER: 401,
    Verdict.WRONG_TOKEN: 401,
}
"""The HTTP status of each verdict (an admitted request's is its handler's; 200 stands for it here)."""

REASONS: dict[Verdict, str] = {
    Verdict.ADMITTED: "admitted",
    Verdict.HEAD_TOO_LARGE: (
        f"the request's head is over {MAX_HEAD_BYTES} bytes or {MAX_HEADER_FIELDS} header fields (431: Request "
        "Header Fields Too Large)"
    ),
    Verdict.BAD_HOST: (
        "the Host header does not name this server (a web page may not drive it by DNS rebinding): send the host "
        "you connect to, e.g. 127.0.0.1 or localhost"
    ),
    Verdict.BAD_ORIGIN: "the Origin header is not a loopback origin (a web page may not drive this server)",
    Verdict.NO_TOKEN: "no bearer token: send Authorization: Bearer TOKEN (EUKHE_MCP_TOKEN, or the server's token file)",
    Verdict.NOT_BEARER: "the Authorization header is not Bearer TOKEN",
    Verdict.WRONG_TOKEN: "the bearer token is not this server's",
}
"""What a refused client reads (never the token)."""

ORIGIN = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>\[[^\]/]*\]|[^:/\[\]]*)(?::(?P<port>[0-9]*))?/?")
"""An origin as browsers send it: scheme://host[:port] (RFC 6454), an IPv6 host in brackets."""


def origin_allowed(origin: str | None) -> bool:
    """Whether a request with this `Origin` header may go on: none, or an http(s) origin on a loopback host."""
    if origin is None:
        return True
    found = ORIGIN.fullmatch(origin)
    if found is None or found.group("scheme").lower() not in ("http", "https"):
        return False
    port = found.group("port")
    if port is not None and (port == "" or int(port) > MAX_PORT):
        return False
    host = found.group("host")
    if host.startswith("["):
        host = host[1:-1]
        if ":" not in host:
            return False
    return bool(host) and is_loopback_host(host)


BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(?P<credentials>\S+) *")
"""`Bearer TOKEN` (the scheme's case is free, RFC 7235 2.1)."""


def token_verdict(authorization: str | None, token: str) -> Verdict:
    """The Authorization header against the server's token (compared in constant time: the time taken says
    nothing of how much of it matched)."""
    if authorization is None:
        return Verdict.NO_TOKEN
    found = BEARER.fullmatch(authorization)
    if found is None:
        return Verdict.NOT_BEARER
    given = found.group("credentials").encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(given, token.encode("utf-8", "surrogateescape")):
        return Verdict.WRONG_TOKEN
    return Verdict.ADMITTED


def admit(
    *,
    head: Head,
    host: str | None,
    hosts: HostRule | None,
    origin: str | None,
    authorization: str | None,
    token: str,
) -> Verdict:
    """The door: the head's size, then the Host (`hosts`: the listener's rule, None on a unix socket), then the
    Origin (a rebinding page learns nothing more), then the token."""
    if not head_fits(head):
        return Verdict.HEAD_TOO_LARGE
    if not host_allowed(host, hosts):
        return Verdict.BAD_HOST
    if not origin_allowed(origin):
        return Verdict.BAD_ORIGIN
    return token_verdict(authorization, token)


# ---- the head -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Head:
    """How big a request's head is: its header fields, and its bytes as on the wire (`head_of`)."""

    fields: int
    size: int


def head_of(method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]]) -> Head:
    """The head of a request as HTTP/1.1 writes it: `METHOD TARGET HTTP/1.1` CRLF, `name: value` CRLF each, CRLF."""
    line = len(method) + 1 + len(target) + len(b" HTTP/1.1\r\n")
    return Head(len(headers), line + sum(len(name) + 2 + len(value) + 2 for name, value in headers) + 2)


def head_fits(head: Head) -> bool:
    """Whether a head is within both bounds."""
    return head.fields <= MAX_HEADER_FIELDS and head.size <= MAX_HEAD_BYTES


# ---- the Host header ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostRule:
    """Which `Host` headers a TCP listener takes: loopback hosts always; beyond a loopback listener (`remote`),
    also any IP address and `names` (lower case, without a final dot)."""

    remote: bool
    names: frozenset[str]


def host_rule(plan: TcpListen | UnixListen, machine_names: Collection[str] = ()) -> HostRule | None:
    """The Host rule of a listener (`machine_names`: this machine's own names, for one beyond loopback); None for a
    unix socket, which checks no Host."""
    if isinstance(plan, UnixListen):
        return None
    if plan.loopback:
        return HostRule(remote=False, names=frozenset())
    named = (name for name in (plan.host, *machine_names) if valid_host(name) and not is_address(name))
    return HostRule(remote=True, names=frozenset(normal_name(name) for name in named))


HOST_HEADER = re.compile(r"(?P<host>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>[0-9]{1,5}))?")
"""A Host header's value: host[:port] (RFC 9110 7.2), an IPv6 host in brackets."""


def host_of(value: str) -> str | None:
    """The host a `Host` header names (an IPv6 address without its brackets), None when it is not one."""
    found = HOST_HEADER.fullmatch(value)
    if found is None or (found.group("port") is not None and int(found.group("port")) > MAX_PORT):
        return None
    host = found.group("host")
    if host.startswith("["):
        host = host[1:-1]
        return host if ":" in host and is_address(host) else None
    return host if host and valid_host(host) else None


def host_allowed(value: str | None, rule: HostRule | None) -> bool:
    """Whether a request with this `Host` header (None: none) may go on, by its listener's rule (None: a unix
    socket, where any passes)."""
    if rule is None:
        return True
    host = None if value is None else host_of(value)
    if host is None:
        return False
    if is_loopback_host(host):
        return True
    return rule.remote and (is_address(host) or normal_name(host) in rule.names)


def is_address(host: str) -> bool:
    """Whether `host` is an IP address (IPv6 without brackets)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def normal_name(name: str) -> str:
    """A host name as compared: lower case, without a final dot."""
    return name.lower().rstrip(".")


# ---- connections --------------------------------------------------------------------------------------------

MAX_CONNECTIONS_PER_PEER = 128
"""Most open connections from one peer. A session holds one for its stream (GET) as long as it lives, and one more
per request in flight; on a loopback listener every local client is the one peer 127.0.0.1 (the MCP conformance
runner alone keeps some 30 sessions with their streams open), so the bound is for all of them: high enough for
several busy clients, low enough that a runaway holds at most this many descriptors."""
MAX_CONNECTIONS = 512
"""Most open connections in all (four peers' worth): half of a common descriptor limit of 1024, the rest left to the
server (connections being refused, the daemon's sockets, files)."""
RETRY_AFTER_S = 1
"""The `Retry-After` of a connection refused: by then a call may have ended, or an idle connection appeared."""


@dataclass(frozen=True, slots=True)
class Open:
    """An open connection, as placing a new one sees it: its peer, and whether it is idle (no request in hand)."""

    peer: str
    idle: bool


class Placement(enum.Enum):
    """What becomes of a new connection."""

    ACCEPT = "accept"  # within both bounds
    EVICT = "evict"  # in place of an idle connection, closed first
    REFUSE_PEER = "refuse_peer"  # 429: its peer holds its bound, none idle
    REFUSE_FULL = "refuse_full"  # 503: the server holds its bound, none idle


@dataclass(frozen=True, slots=True)
class Place:
    """A new connection's placement; `victim` is the index of the connection it replaces (EVICT only)."""

    placement: Placement
    victim: int | None = None


STATUS_OF_PLACEMENT: dict[Placement, int] = {Placement.REFUSE_PEER: 429, Placement.REFUSE_FULL: 503}
"""The status of each refusal."""

PLACEMENT_MESSAGES: dict[Placement, str] = {
    Placement.REFUSE_PEER: (
        f"too many connections from your address ({MAX_CONNECTIONS_PER_PEER} open, each with a request in hand): "
        "retry once one ends"
    ),
    Placement.REFUSE_FULL: f"the server holds {MAX_CONNECTIONS} connections, each with a request in hand: retry later",
}


def place(
    peer: str,
    connections: Sequence[Open],
    *,
    per_peer: int = MAX_CONNECTIONS_PER_PEER,
    total: int = MAX_CONNECTIONS,
) -> Place:
    """Where a new connection from `peer` goes, given the open ones (oldest first). Past its peer's bound it
    replaces that peer's oldest idle connection; past the total, the oldest idle one of the peer with the most
    connections; with no such connection it is refused."""
    held: dict[str, int] = {}
    for connection in connections:
        held[connection.peer] = held.get(connection.peer, 0) + 1
    if held.get(peer, 0) >= per_peer:
        mine = [index for index, connection in enumerate(connections) if connection.peer == peer and connection.idle]
        return Place(Placement.EVICT, mine[0]) if mine else Place(Placement.REFUSE_PEER)
    if len(connections) >= total:
        idle = [index for index, connection in enumerate(connections) if connection.idle]
        if not idle:
            return Place(Placement.REFUSE_FULL)
        return Place(Placement.EVICT, min(idle, key=lambda index: (-held[connections[index].peer], index)))
    return Place(Placement.ACCEPT)


def peer_of_address(address: str) -> str:
    """The peer a TCP connection is from: its IP address (an IPv4-mapped IPv6 one as IPv4; the port never)."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)


# ---- routing ------------------------------------------------------------------------------------------------


class SessionFact(enum.Enum):
    """What the request's `Mcp-Session-Id` header names."""

    NONE = "none"  # no header
    KNOWN = "known"  # a session this server gave and still serves
    UNKNOWN = "unknown"  # another id: ended, expired, or never this server's


class Body(enum.Enum):
    """What the body of a request is, for routing (only a POST without a session id has it read: `needs_body`)."""

    NOT_READ = "not_read"  # the body is left to the connection it goes to
    UNPARSABLE = "unparsable"  # not JSON: invalid UTF-8, bad syntax, nested or numbered past the parser's bounds
    INITIALIZE = "initialize"  # one JSON-RPC initialize request (`is_initialize`)
    OTHER = "other"  # JSON, and anything but an initialize request


class Era(enum.Enum):
    """Which protocol era a request is of, by its `MCP-Protocol-Version` header (`era_of`)."""

    HANDSHAKE = "handshake"  # no header, or a revision of the initialize handshake (2025-11-25 and before)
    PER_REQUEST = "per_request"  # any other value: 2026-07-28, each request carrying its own version


def era_of(version: str | None, handshake_versions: Collection[str]) -> Era:
    """The era of a request whose `MCP-Protocol-Version` header is `version` (None: no header), given the
    revisions of the handshake era (the SDK's own list, so both route alike)."""
    return Era.HANDSHAKE if version is None or version in handshake_versions else Era.PER_REQUEST


class Route(enum.Enum):
    """Where an admitted request goes."""

    PER_REQUEST = "per_request"  # to the server's one MCP server of the per-request era (the SDK's entry for it)
    FORWARD = "forward"  # to its connection's session manager (the SDK's streamable HTTP transport)
    OPEN = "open"  # an initialize: a new connection, with its session, then as FORWARD
    PARSE_ERROR = "parse_error"  # 400, JSON-RPC -32700: the body without a session id is not JSON
    NEED_SESSION = "need_session"  # 400: only an initialize may come without a session id
    UNKNOWN_SESSION = "unknown_session"  # 404: the client must initialize again (MCP: session management)
    NOT_ALLOWED = "not_allowed"  # 405: streamable HTTP uses POST, GET and DELETE only
    NOT_FOUND = "not_found"  # 404: not the endpoint's path


MCP_METHODS = ("POST", "GET", "DELETE")
"""The HTTP methods of streamable HTTP."""

ROUTES: dict[tuple[str, SessionFact, Body], Route] = {
    ("POST", SessionFact.KNOWN, Body.NOT_READ): Route.FORWARD,
    ("GET", SessionFact.KNOWN, Body.NOT_READ): Route.FORWARD,
    ("DELETE", SessionFact.KNOWN, Body.NOT_READ): Route.FORWARD,
    ("POST", SessionFact.UNKNOWN, Body.NOT_READ): Route.UNKNOWN_SESSION,
    ("GET", SessionFact.UNKNOWN, Body.NOT_READ): Route.UNKNOWN_SESSION,
    ("DELETE", SessionFact.UNKNOWN, Body.NOT_READ): Route.UNKNOWN_SESSION,
    ("POST", SessionFact.NONE, Body.INITIALIZE): Route.OPEN,
    ("POST", SessionFact.NONE, Body.OTHER): Route.NEED_SESSION,
    ("POST", SessionFact.NONE, Body.UNPARSABLE): Route.PARSE_ERROR,
    ("POST", SessionFact.NONE, Body.NOT_READ): Route.NEED_SESSION,  # a body not read opens nothing
    ("GET", SessionFact.NONE, Body.NOT_READ): Route.NEED_SESSION,
    ("DELETE", SessionFact.NONE, Body.NOT_READ): Route.NEED_SESSION,
}
"""(method, session id, body) → route. Only a POST without a session id has its body read (`needs_body`), so the
others are looked up with `Body.NOT_READ`."""

STATUS_OF_ROUTE: dict[Route, int] = {
    Route.PARSE_ERROR: 400,
    Route.NEED_SESSION: 400,
    Route.UNKNOWN_SESSION: 404,
    Route.NOT_ALLOWED: 405,
    Route.NOT_FOUND: 404,
}
"""The status of each route the server answers itself."""

PARSE_ERROR = -32700
"""JSON-RPC 2.0's code for a body that is not JSON."""
INVALID_REQUEST = -32600
"""JSON-RPC 2.0's code for a body that is not a request the server takes."""

ERROR_CODES: dict[Route, int] = {
    Route.PARSE_ERROR: PARSE_ERROR,
    Route.NEED_SESSION: INVALID_REQUEST,
    Route.UNKNOWN_SESSION: INVALID_REQUEST,
    Route.NOT_ALLOWED: INVALID_REQUEST,
    Route.NOT_FOUND: INVALID_REQUEST,
}
"""The JSON-RPC error code of each route the server answers itself."""

MESSAGES: dict[Route, str] = {
    Route.PARSE_ERROR: "Parse error: the request body is not JSON",
    Route.NEED_SESSION: (
        "no Mcp-Session-Id: send initialize first, or speak the 2026-07-28 protocol (its MCP-Protocol-Version "
        "header on every request)"
    ),
    Route.UNKNOWN_SESSION: "Session not found: it ended or expired; initialize again",
    Route.NOT_ALLOWED: "streamable HTTP takes POST, GET and DELETE",
    Route.NOT_FOUND: f"the MCP endpoint is {ENDPOINT}",
}


def route(*, path: str, method: str, session: SessionFact, body: Body, era: Era) -> Route:
    """Where an admitted request goes (`body`: what its body is; only read for a POST without a session id of the
    handshake era)."""
    if path.rstrip("/") != ENDPOINT:
        return Route.NOT_FOUND
    if era is Era.PER_REQUEST:
        return Route.PER_REQUEST
    return ROUTES.get((method, session, body if needs_body(method, session, era) else Body.NOT_READ), Route.NOT_ALLOWED)


def needs_body(method: str, session: SessionFact, era: Era) -> bool:
    """Whether routing must read the body first: a POST without a session id of the handshake era opens a connection
    only when it is an initialize."""
    return method == "POST" and session is SessionFact.NONE and era is Era.HANDSHAKE


def body_of(message: object) -> Body:
    """What a body that parsed as JSON (`message`, its value) is: an initialize request, or any other."""
    return Body.INITIALIZE if is_initialize(message) else Body.OTHER


def is_initialize(message: object) -> bool:
    """Whether a JSON value is one JSON-RPC initialize request (an object with an id and that method)."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and message.get("method") == "initialize"
        and isinstance(message.get("id"), (str, int))
        and not isinstance(message.get("id"), bool)
    )
