"""Laws of `eukhe mcp --http`'s decisions (`eukhe.core.mcp_http`): where it listens, the door, the routing.

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
    MCP_METHODS,
    PARSE_ERROR,
    STATUS,
    STATUS_OF_ROUTE,
    Body,
    Era,
    ListenReason,
    ListenRefusal,
    Route,
    SessionFact,
    TcpListen,
    UnixListen,
    Verdict,
    admit,
    body_of,
    era_of,
    is_initialize,
    is_loopback_host,
    needs_body,
    origin_allowed,
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


def test_door_origin_before_token_over_every_pair() -> None:
    """A bad Origin is 403 whatever the token; a good or absent one leaves the token's verdict, 401 unless right."""
    for origin, header in itertools.product(ORIGINS, HEADERS):
        verdict = admit(origin=origin, authorization=header, token=TOKEN)
        if not origin_allowed(origin):
            assert verdict is Verdict.BAD_ORIGIN
            assert STATUS[verdict] == 403
        else:
            assert verdict is token_verdict(header, TOKEN)
            assert STATUS[verdict] == (200 if header in ADMITTED_HEADERS else 401)


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
