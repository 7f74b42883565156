"""Laws of `eukhe mcp --http`'s decisions (`eukhe.core.mcp_http`): where it listens, the door (the head's size,
the Host, the Origin, the token), the routing, and where a new connection goes.

Each law is checked over a small scope whole (every host, origin, header, method and session fact listed here) and
with Hypothesis over free input. The references below are written from the rules in the module's docstring, not
from its code.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from eukhe.core.mcp_http import (
    ENDPOINT,
    ERROR_CODES,
    INVALID_REQUEST,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_PEER,
    MAX_HEAD_BYTES,
    MAX_HEADER_FIELDS,
    MCP_METHODS,
    PARSE_ERROR,
    PLACEMENT_MESSAGES,
    STATUS,
    STATUS_OF_PLACEMENT,
    STATUS_OF_ROUTE,
    Body,
    Era,
    Head,
    HostRule,
    ListenReason,
    ListenRefusal,
    Open,
    Place,
    Placement,
    Route,
    SessionFact,
    TcpListen,
    UnixListen,
    Verdict,
    admit,
    body_of,
    era_of,
    head_fits,
    head_of,
    host_allowed,
    host_of,
    host_rule,
    is_initialize,
    is_loopback_host,
    needs_body,
    origin_allowed,
    peer_of_address,
    place,
    plan_listen,
    route,
    token_verdict,
)

LOOPBACK_HOSTS = ["127.0.0.1", "127.1.2.3", "127.255.255.254", "localhost", "LocalHost", "localhost.", "::1"]
LOOPBACK_HOSTS += ["0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"]
REMOTE_HOSTS = ["0.0.0.0", "::", "10.0.0.1", "192.168.1.5", "128.0.0.1", "8.8.8.8", "example.com", "localhost.evil"]
REMOTE_HOSTS += ["::2", "fe80::1", "::ffff:10.0.0.1", "127.example.com", "evil-localhost"]
PORTS = ["0", "1", "8000", "65535"]
BAD_PORTS = ["", "65536", "-1", "80a", "８０", "99999999"]


def bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# ---- listening ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("allow_remote", [False, True])
def test_listen_local_by_default_over_every_listed_host_and_port(allow_remote: bool) -> None:
    """A loopback host always listens; any other only with --allow-remote, and its refusal names the flag."""
    for host, port in itertools.product(LOOPBACK_HOSTS + REMOTE_HOSTS, PORTS):
        plan = plan_listen(f"{bracketed(host)}:{port}", allow_remote=allow_remote)
        loopback = host in LOOPBACK_HOSTS
        if loopback or allow_remote:
            assert plan == TcpListen(host=host, port=int(port), loopback=loopback), (host, port)
        else:
            assert isinstance(plan, ListenRefusal), (host, port)
            assert plan.reason is ListenReason.REMOTE
            assert "--allow-remote" in plan.message


@pytest.mark.parametrize("allow_remote", [False, True])
def test_listen_refuses_a_bad_port_or_a_malformed_address(allow_remote: bool) -> None:
    for host, port in itertools.product(["127.0.0.1", "::1", "localhost"], BAD_PORTS):
        plan = plan_listen(f"{bracketed(host)}:{port}", allow_remote=allow_remote)
        assert isinstance(plan, ListenRefusal) and plan.reason is ListenReason.BAD_PORT, (host, port)
    for text in ["", "8000", ":8000", "::1:8000", "[127.0.0.1]:80", "[::1]", "a b:80", "unix:", "host_name:80", "[]:1"]:
        plan = plan_listen(text, allow_remote=allow_remote)
        assert isinstance(plan, ListenRefusal) and plan.reason is ListenReason.MALFORMED, text


@given(st.text(min_size=1).filter(lambda path: "\0" not in path), st.booleans())
def test_listen_local_by_default_a_unix_socket_is_always_local(path: str, allow_remote: bool) -> None:
    assert plan_listen(f"unix:{path}", allow_remote=allow_remote) == UnixListen(path)


@given(st.text(), st.booleans())
def test_listen_local_by_default_over_free_text(text: str, allow_remote: bool) -> None:
    """Any text is a plan or a refusal (never an exception); a TCP plan is loopback, or allowed remote, and its URL
    names the endpoint on the same host and port."""
    plan = plan_listen(text, allow_remote=allow_remote)
    if isinstance(plan, TcpListen):
        assert plan.loopback is is_loopback_host(plan.host)
        assert plan.loopback or allow_remote
        assert 0 <= plan.port <= 65535
        assert plan.url() == f"http://{bracketed(plan.host)}:{plan.port}{ENDPOINT}"
        assert plan_listen(plan.url()[len("http://") : -len(ENDPOINT)], allow_remote=allow_remote) == plan
    else:
        assert isinstance(plan, (UnixListen, ListenRefusal))


@given(st.ip_addresses(), st.integers(0, 65535), st.booleans())
def test_listen_local_by_default_over_every_ip_address(address: object, port: int, allow_remote: bool) -> None:
    host = str(address)
    plan = plan_listen(f"{bracketed(host)}:{port}", allow_remote=allow_remote)
    loopback = getattr(address, "is_loopback", False) or (
        getattr(address, "ipv4_mapped", None) is not None and address.ipv4_mapped.is_loopback  # type: ignore[attr-defined]
    )
    if loopback or allow_remote:
        assert plan == TcpListen(host=host, port=port, loopback=loopback)
    else:
        assert isinstance(plan, ListenRefusal) and plan.reason is ListenReason.REMOTE


# ---- the door -----------------------------------------------------------------------------------------------

LOOPBACK_ORIGINS = [
    f"{scheme}://{bracketed(host)}{port}"
    for scheme in ("http", "https", "HTTP")
    for host in ("localhost", "127.0.0.1", "::1", "127.9.9.9")
    for port in ("", ":1", ":6274", ":65535")
]
OTHER_ORIGINS = ["null", "", "http://evil.com", "https://localhost.evil.com", "http://127.0.0.1.evil.com",
                 "file://", "file:///etc", "chrome-extension://abc", "ws://localhost", "http://localhost:",
                 "http://localhost:65536", "http://[127.0.0.1]", "http://10.0.0.1:80", "http://localhost/path",
                 "localhost", "http://user@localhost", "http://0.0.0.0", "http://[::]:80"]  # fmt: skip


def test_origin_loopback_only_over_every_listed_origin() -> None:
    assert origin_allowed(None), "no Origin: a client that is not a browser"
    for origin in LOOPBACK_ORIGINS:
        assert origin_allowed(origin), origin
        assert origin_allowed(origin + "/"), origin
    for origin in OTHER_ORIGINS:
        assert not origin_allowed(origin), origin


@given(st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}", fullmatch=True), st.integers(0, 65535))
def test_origin_loopback_only_no_other_name_passes(name: str, port: int) -> None:
    allowed = origin_allowed(f"http://{name}:{port}")
    assert allowed is (name == "localhost")


@given(st.ip_addresses(), st.sampled_from(["http", "https"]))
def test_origin_loopback_only_over_every_ip_address(address: object, scheme: str) -> None:
    host = str(address)
    assert origin_allowed(f"{scheme}://{bracketed(host)}") is is_loopback_host(host)


@given(st.text())
def test_origin_loopback_only_over_free_text(origin: str) -> None:
    """Whatever a client sends, an admitted Origin is an http(s) origin on a loopback host."""
    if origin_allowed(origin):
        scheme, _, rest = origin.partition("://")
        assert scheme.lower() in ("http", "https")
        host = rest.rstrip("/").rsplit(":", 1)[0] if not rest.startswith("[") else rest[1 : rest.index("]")]
        assert is_loopback_host(host), origin


TOKEN = "s3cret-Token_0"
HEADERS = [None, "", "Bearer", "Bearer ", f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER  {TOKEN} ", f"Basic {TOKEN}",
           f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN.upper()}", TOKEN, f"Bearer {TOKEN} extra",
           f"Token {TOKEN}", "Bearer\t" + TOKEN]  # fmt: skip
ADMITTED_HEADERS = {f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER  {TOKEN} "}


def test_token_exact_over_every_listed_header() -> None:
    for header in HEADERS:
        verdict = token_verdict(header, TOKEN)
        assert (verdict is Verdict.ADMITTED) is (header in ADMITTED_HEADERS), header
        if header is None:
            assert verdict is Verdict.NO_TOKEN
        elif verdict is not Verdict.ADMITTED:
            assert verdict in (Verdict.NOT_BEARER, Verdict.WRONG_TOKEN), header


tokens = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=64)


@given(tokens, tokens)
@example(token=TOKEN, given_token=TOKEN + "x")
@example(token=TOKEN, given_token=TOKEN[:-1])
def test_token_exact_only_the_servers_token_passes(token: str, given_token: str) -> None:
    verdict = token_verdict(f"Bearer {given_token}", token)
    assert (verdict is Verdict.ADMITTED) is (given_token == token)
    assert verdict in (Verdict.ADMITTED, Verdict.WRONG_TOKEN)


@given(st.text(), tokens)
def test_token_exact_over_free_headers(header: str, token: str) -> None:
    """An admitted header is `Bearer` (any case), spaces, the token, spaces: nothing else passes."""
    if token_verdict(header, token) is Verdict.ADMITTED:
        scheme, _, rest = header.partition(" ")
        assert scheme.lower() == "bearer"
        assert rest.strip(" ") == token


ORIGINS = [None, "http://localhost:6274", "http://evil.com", "null"]

# ---- the head -----------------------------------------------------------------------------------------------


def written_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    return b"%s %s HTTP/1.1\r\n%s\r\n" % (method, target, b"".join(b"%s: %s\r\n" % field for field in headers))


header_fields = st.lists(st.tuples(st.binary(min_size=1, max_size=40), st.binary(max_size=400)), max_size=120)


@given(st.binary(min_size=1, max_size=10), st.binary(min_size=1, max_size=300), header_fields)
def test_head_bound_measures_the_head_as_written(
    method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    head = head_of(method, target, headers)
    assert head == Head(fields=len(headers), size=len(written_head(method, target, headers)))
    assert head_fits(head) is (len(headers) <= MAX_HEADER_FIELDS and head.size <= MAX_HEAD_BYTES)


def test_head_bound_over_every_size_at_the_edges() -> None:
    fields = [0, 1, MAX_HEADER_FIELDS - 1, MAX_HEADER_FIELDS, MAX_HEADER_FIELDS + 1, 10**6]
    sizes = [0, 1, MAX_HEAD_BYTES - 1, MAX_HEAD_BYTES, MAX_HEAD_BYTES + 1, 10**9]
    for count, size in itertools.product(fields, sizes):
        assert head_fits(Head(count, size)) is (count <= MAX_HEADER_FIELDS and size <= MAX_HEAD_BYTES), (count, size)


# ---- the Host header ----------------------------------------------------------------------------------------

LOOPBACK = HostRule(remote=False, names=frozenset())
REMOTE = HostRule(remote=True, names=frozenset({"devbox.example", "myhost"}))
HOST_PORTS = ["", ":0", ":1", ":8765", ":65535", ":08765"]
BAD_HOST_PORTS = [":", ":65536", ":-1", ":80a", ":８０", ":123456", "::80"]
REMOTE_NAMES = ["example.com", "localhost.evil", "127.example.com", "evil-localhost"]  # in REMOTE_HOSTS
NAMED = ["devbox.example", "DevBox.Example", "devbox.example.", "myhost", "MYHOST"]
NOT_NAMED = ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "evil-localhost", "devbox.example.evil",
             "xdevbox.example", "my-host", "localhost1"]  # fmt: skip
MALFORMED_HOSTS = ["", " ", "[127.0.0.1]", "[::1", "::1", "user@localhost", "localhost/path", "local host", "[]",
                   "[localhost]", "localhost\x00", "-evil", "a..b", "[fe80::1]x", "host_name"]  # fmt: skip


def host_value(host: str, port: str) -> str:
    return f"{bracketed(host)}{port}"


def test_host_checked_over_every_listed_host_port_and_rule() -> None:
    """A loopback host passes every TCP rule with any port or none; an IP address that is not loopback, and the
    listener's own names, pass a remote listener's rule only; any other name, a malformed value and no Host pass
    no TCP rule; a unix socket's (None) takes anything."""
    for host, port in itertools.product(LOOPBACK_HOSTS, HOST_PORTS):
        for rule in (LOOPBACK, REMOTE, None):
            assert host_allowed(host_value(host, port), rule), (host, port, rule)
    for host, port in itertools.product(REMOTE_HOSTS + NAMED + NOT_NAMED, HOST_PORTS):
        value = host_value(host, port)
        assert not host_allowed(value, LOOPBACK), value
        assert host_allowed(value, REMOTE) is (host not in NOT_NAMED + REMOTE_NAMES), value
        assert host_allowed(value, None), value
    for host, port in itertools.product([*LOOPBACK_HOSTS, "10.0.0.1", "devbox.example"], BAD_HOST_PORTS):
        assert not host_allowed(host_value(host, port), LOOPBACK), (host, port)
        assert not host_allowed(host_value(host, port), REMOTE), (host, port)
    for value in [None, *MALFORMED_HOSTS]:
        assert not host_allowed(value, LOOPBACK), value
        assert not host_allowed(value, REMOTE), value
        assert host_allowed(value, None), value


@given(st.ip_addresses(), st.none() | st.integers(0, 65535), st.booleans())
def test_host_checked_over_every_ip_address(address: object, port: int | None, remote: bool) -> None:
    """An address passes a loopback listener's rule when it is loopback, a remote listener's always."""
    host = str(address)
    value = bracketed(host) + ("" if port is None else f":{port}")
    rule = REMOTE if remote else LOOPBACK
    assert host_allowed(value, rule) is (remote or is_loopback_host(host)), value


names = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}", fullmatch=True)


@given(names, st.sets(names, max_size=3), st.none() | st.integers(0, 65535))
def test_host_checked_a_name_passes_when_loopback_or_named(name: str, named: set[str], port: int | None) -> None:
    value = name + ("" if port is None else f":{port}")
    assert host_allowed(value, LOOPBACK) is (name == "localhost")
    rule = HostRule(remote=True, names=frozenset(named))
    assert host_allowed(value, rule) is (name == "localhost" or name in named)
    assert host_allowed(value.upper(), rule) is host_allowed(value, rule), "names are compared in any case"


@given(st.text(), st.booleans())
def test_host_checked_over_free_text(value: str, remote: bool) -> None:
    """Whatever a client sends, an admitted Host names a loopback host, or (remote) an address or a named host;
    its port, if any, is a port; and the port never changes the verdict."""
    rule = REMOTE if remote else LOOPBACK
    if not host_allowed(value, rule):
        return
    host = host_of(value)
    assert host is not None
    assert is_loopback_host(host) or (remote and (":" in host or host.replace(".", "").isdigit() or
                                                  host.lower().rstrip(".") in REMOTE.names)), value  # fmt: skip
    bare = bracketed(host)
    assert value == bare or (value.startswith(bare + ":") and int(value[len(bare) + 1 :]) <= 65535), value
    for port in ("", ":1", ":65535"):
        assert host_allowed(bare + port, rule), (value, port)


def test_host_checked_by_each_listeners_rule() -> None:
    """A unix socket checks no Host; a loopback listener takes loopback hosts; one beyond loopback also its own
    names (the bound host and the machine's names; an address is taken anyway, as is every address)."""
    assert host_rule(UnixListen("/tmp/s")) is None
    assert host_rule(UnixListen("/tmp/s"), ["myhost"]) is None
    for host in LOOPBACK_HOSTS:
        assert host_rule(TcpListen(host, 0, loopback=True), ["myhost"]) == LOOPBACK, host
    assert host_rule(TcpListen("0.0.0.0", 8765, loopback=False), ["MyHost.", "not a name"]) == HostRule(
        remote=True, names=frozenset({"myhost"})
    )
    assert host_rule(TcpListen("DevBox.Example", 1, loopback=False), []) == HostRule(
        remote=True, names=frozenset({"devbox.example"})
    )
    assert host_rule(TcpListen("::", 1, loopback=False), ["10.0.0.1"]) == HostRule(remote=True, names=frozenset())


# ---- the door -----------------------------------------------------------------------------------------------

FITS = Head(fields=10, size=500)
HEADS = [FITS, Head(fields=MAX_HEADER_FIELDS + 1, size=500), Head(fields=10, size=MAX_HEAD_BYTES + 1)]
DOOR_HOSTS = [None, "127.0.0.1:8765", "localhost", "evil.example:8765", "10.0.0.1:8765", "devbox.example"]


def reference_door(
    head: Head, host: str | None, hosts: HostRule | None, origin: str | None, header: str | None
) -> Verdict:
    """The order of the module's docstring, written out."""
    if head.fields > MAX_HEADER_FIELDS or head.size > MAX_HEAD_BYTES:
        return Verdict.HEAD_TOO_LARGE
    if not host_allowed(host, hosts):
        return Verdict.BAD_HOST
    if not origin_allowed(origin):
        return Verdict.BAD_ORIGIN
    return token_verdict(header, TOKEN)


def test_door_head_host_origin_then_token_over_every_combination() -> None:
    """The head's size first (431), then the Host (403), then the Origin (403), then the token (401): each judged
    before the next is looked at, whatever the next would say."""
    for head, host, hosts, origin, header in itertools.product(
        HEADS, DOOR_HOSTS, [LOOPBACK, REMOTE, None], ORIGINS, HEADERS
    ):
        verdict = admit(head=head, host=host, hosts=hosts, origin=origin, authorization=header, token=TOKEN)
        assert verdict is reference_door(head, host, hosts, origin, header), (head, host, hosts, origin, header)
        assert STATUS[verdict] == {
            Verdict.ADMITTED: 200,
            Verdict.HEAD_TOO_LARGE: 431,
            Verdict.BAD_HOST: 403,
            Verdict.BAD_ORIGIN: 403,
        }.get(verdict, 401)


# ---- routing ------------------------------------------------------------------------------------------------

PATHS = [ENDPOINT, ENDPOINT + "/", "/", "/mcpx", "/sse", "/mcp/x", ""]
METHODS = [*MCP_METHODS, "PUT", "PATCH", "OPTIONS", "HEAD", "post"]


def reference_route(path: str, method: str, session: SessionFact, body: Body, era: Era) -> Route:
    """The rules of the module's docstring, written out."""
    if path not in (ENDPOINT, ENDPOINT + "/"):
        return Route.NOT_FOUND
    if era is Era.PER_REQUEST:
        return Route.PER_REQUEST
    if method not in MCP_METHODS:
        return Route.NOT_ALLOWED
    if session is SessionFact.KNOWN:
        return Route.FORWARD
    if session is SessionFact.UNKNOWN:
        return Route.UNKNOWN_SESSION
    if method == "POST" and body is Body.UNPARSABLE:
        return Route.PARSE_ERROR
    return Route.OPEN if method == "POST" and body is Body.INITIALIZE else Route.NEED_SESSION


def test_route_table_over_every_request() -> None:
    for path, method, session, body, era in itertools.product(PATHS, METHODS, SessionFact, Body, Era):
        where = route(path=path, method=method, session=session, body=body, era=era)
        assert where is reference_route(path, method, session, body, era), (path, method, session, body, era)
        read = needs_body(method, session, era)
        assert (where in (Route.OPEN, Route.PARSE_ERROR)) <= read, "only a body read can open or be unparsable"
        if where not in (Route.FORWARD, Route.OPEN, Route.PER_REQUEST):
            assert STATUS_OF_ROUTE[where] in (400, 404, 405)
            assert ERROR_CODES[where] == (PARSE_ERROR if where is Route.PARSE_ERROR else INVALID_REQUEST)


HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@given(st.none() | st.sampled_from([*HANDSHAKE_VERSIONS, "2026-07-28", ""]) | st.text())
def test_era_of_is_the_handshake_for_no_header_or_one_of_its_revisions_and_per_request_else(
    version: str | None,
) -> None:
    expected = Era.HANDSHAKE if version is None or version in HANDSHAKE_VERSIONS else Era.PER_REQUEST
    assert era_of(version, HANDSHAKE_VERSIONS) is expected


def test_era_of_uses_the_sdks_revisions() -> None:
    assert all(era_of(version, HANDSHAKE_PROTOCOL_VERSIONS) is Era.HANDSHAKE for version in HANDSHAKE_VERSIONS)
    assert all(era_of(version, HANDSHAKE_PROTOCOL_VERSIONS) is Era.PER_REQUEST for version in MODERN_PROTOCOL_VERSIONS)


def initialize(request_id: object = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {}}


def test_route_table_only_an_initialize_request_opens() -> None:
    assert is_initialize(initialize(1)) and is_initialize(initialize("a"))
    assert body_of(initialize(1)) is Body.INITIALIZE
    for message in [
        "",
        [],
        None,
        [initialize()],  # a batch
        initialize(None),
        initialize(True),
        initialize(1.5),
        {"jsonrpc": "2.0", "method": "initialize"},  # a notification
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "1.0", "id": 1, "method": "initialize"},
    ]:
        assert not is_initialize(message), message
        assert body_of(message) is Body.OTHER, message


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
)


@given(JSON_VALUES)
@example(json.loads(json.dumps(initialize(7))))
def test_route_table_any_json_value_is_judged_without_error(message: object) -> None:
    assert body_of(message) in (Body.INITIALIZE, Body.OTHER)


# ---- connections --------------------------------------------------------------------------------------------

PEERS = ["a", "b", "c"]


def reference_place(peer: str, connections: list[Open], per_peer: int, total: int) -> Place:
    """The rules of the module's docstring, written out."""
    mine = [index for index, connection in enumerate(connections) if connection.peer == peer]
    if len(mine) >= per_peer:
        idle = [index for index in mine if connections[index].idle]
        return Place(Placement.EVICT, idle[0]) if idle else Place(Placement.REFUSE_PEER)
    if len(connections) >= total:
        held = {other: sum(connection.peer == other for connection in connections) for other in PEERS}
        idle = [index for index, connection in enumerate(connections) if connection.idle]
        if not idle:
            return Place(Placement.REFUSE_FULL)
        most = max(held[connections[index].peer] for index in idle)
        return Place(Placement.EVICT, next(index for index in idle if held[connections[index].peer] == most))
    return Place(Placement.ACCEPT)


def after(peer: str, connections: list[Open], decided: Place) -> list[Open]:
    """The open connections once the decision is carried out (the new one not idle: its request comes)."""
    if decided.placement is Placement.ACCEPT:
        return [*connections, Open(peer, idle=False)]
    if decided.placement is Placement.EVICT:
        assert decided.victim is not None
        return [*connections[: decided.victim], *connections[decided.victim + 1 :], Open(peer, idle=False)]
    return connections


def within(connections: list[Open], per_peer: int, total: int) -> bool:
    return len(connections) <= total and all(
        sum(connection.peer == peer for connection in connections) <= per_peer for peer in PEERS
    )


def check_place(peer: str, connections: list[Open], per_peer: int, total: int) -> None:
    decided = place(peer, connections, per_peer=per_peer, total=total)
    assert decided == reference_place(peer, connections, per_peer, total), (peer, connections, per_peer, total)
    if decided.placement is Placement.EVICT:
        assert decided.victim is not None and connections[decided.victim].idle, "only an idle connection is closed"
    else:
        assert decided.victim is None
    refused = decided.placement in (Placement.REFUSE_PEER, Placement.REFUSE_FULL)
    assert refused is (decided.placement in STATUS_OF_PLACEMENT)
    if refused:  # refused only when nothing idle could make room
        mine_idle = any(connection.idle and connection.peer == peer for connection in connections)
        assert not mine_idle and (decided.placement is Placement.REFUSE_PEER or not any(c.idle for c in connections))
    assert within(after(peer, connections, decided), per_peer, total), "the bounds hold after every placement"


def test_connections_bounded_over_every_small_table() -> None:
    """Every sequence of up to 5 open connections of 3 peers, idle or not, within bounds of 1 to 3 per peer and
    up to 5 in all: the placement of a new one from each peer is the reference's, and keeps the bounds."""
    kinds = [Open(peer, idle) for peer in PEERS for idle in (False, True)]
    for per_peer in range(1, 4):
        for total in range(per_peer, 6):
            for length in range(total + 1):
                for connections in itertools.product(kinds, repeat=length):
                    if within(list(connections), per_peer, total):
                        for peer in PEERS:
                            check_place(peer, list(connections), per_peer, total)


@given(
    st.sampled_from(PEERS),
    st.lists(st.builds(Open, st.sampled_from(PEERS), st.booleans()), max_size=40),
    st.integers(1, 20),
    st.integers(0, 20),
)
def test_connections_bounded_over_random_tables(peer: str, connections: list[Open], per_peer: int, more: int) -> None:
    total = per_peer + more
    while not within(connections, per_peer, total):  # only tables within the bounds can happen
        connections = connections[:-1]
    check_place(peer, connections, per_peer, total)


def test_connections_bounded_by_the_named_numbers() -> None:
    assert MAX_CONNECTIONS_PER_PEER == 128 and MAX_CONNECTIONS == 512
    busy = [Open("a", idle=False)] * MAX_CONNECTIONS_PER_PEER
    assert place("a", busy) == Place(Placement.REFUSE_PEER)
    assert place("b", busy) == Place(Placement.ACCEPT), "another peer is served"
    full = [Open(str(n), idle=False) for n in range(MAX_CONNECTIONS)]
    assert place("x", full) == Place(Placement.REFUSE_FULL)
    assert STATUS_OF_PLACEMENT == {Placement.REFUSE_PEER: 429, Placement.REFUSE_FULL: 503}
    assert set(PLACEMENT_MESSAGES) == set(STATUS_OF_PLACEMENT)


@given(st.ip_addresses())
def test_peer_is_the_address_an_ipv4_mapped_one_as_ipv4(address: object) -> None:
    host = str(address)
    mapped = getattr(address, "ipv4_mapped", None)
    assert peer_of_address(host) == (str(mapped) if mapped is not None else host)
    if ":" not in host:
        assert peer_of_address(f"::ffff:{host}") == host
