"""Laws of the network allowlist (eukhe.core.allowlist): which names a confined process reaches through eukhe's
proxy, and how the proxy reads a request. Free names over a small alphabet, and exhaustive tables of the tricks a
URL parser may be fooled by."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import allowlist as core
from eukhe.core import sandbox

LABELS = ["a", "b", "example", "org", "x-y", "0", "1"]
names = st.lists(st.sampled_from(LABELS), min_size=1, max_size=4).map(".".join)
ports = st.sampled_from([80, 443, 22, 8080])


def host(text: str) -> core.Host:
    found = core.normal_name(text)
    assert not isinstance(found, core.Bad), (text, found)
    return found


@given(names, names, ports)
def test_allowlist_deny_wins(name: str, other: str, port: int) -> None:
    """A name that a deny pattern matches is refused, whatever allows it (the same name, a wildcard above it)."""
    target = core.normal_name(name)
    if isinstance(target, core.Bad):
        return
    for allow in ([name], [f"*.{other}", name], ["*." + name.split(".", 1)[-1], name]):
        for deny in ([name], [f"*.{name.split('.', 1)[-1]}"] if "." in name else [name]):
            rules = core.rules(allow, deny)
            denied = any(p.matches(target) for p in rules.deny)
            if denied:
                got = core.decide(rules, target, port)
                assert isinstance(got, core.Refuse)
                assert got.setting == "sandbox.deny_domains"


@given(names, names)
def test_allowlist_wildcard_is_subdomains_only(base: str, name: str) -> None:
    """`*.BASE` matches exactly the names that end in `.BASE`: never BASE itself, never a name that merely ends with
    BASE's letters (`evilexample.org` for `*.example.org`)."""
    found = core.pattern(f"*.{base}")
    target = core.normal_name(name)
    if isinstance(found, core.Bad) or isinstance(target, core.Bad) or isinstance(found.host, core.Address):
        return
    assert found.matches(target) is target.text.endswith("." + found.host.text)
    assert not found.matches(found.host)
    assert not found.matches(host("evil" + found.host.text))


def test_allowlist_ip_literal_needs_naming_small_scope() -> None:
    """An address is reached only when a pattern names that address: no name, no wildcard stands for one; every
    spelling a resolver would read as an address is that address or refused."""
    rules = core.rules(["*.example.org", "example.org", "localhost"], [])
    for text in ("127.0.0.1", "8.8.8.8", "::1", "::ffff:127.0.0.1", "10.0.0.1"):
        got = core.decide(rules, host(text), 80)
        assert isinstance(got, core.Refuse)
        assert got.setting == "sandbox.allow_domains"
    named = core.rules(["127.0.0.1", "[::1]"], [])
    assert core.decide(named, host("127.0.0.1"), 80) == core.ALLOW
    assert core.decide(named, host("::1"), 80) == core.ALLOW
    assert core.decide(named, host("::ffff:127.0.0.1"), 80) == core.ALLOW  # the same address, mapped
    for tricky in ("127.1", "0x7f.0.0.1", "2130706433", "0177.0.0.1", "127.0.0.01", "1.2.3.4.5", "0x7f000001"):
        assert isinstance(core.normal_name(tricky), core.Bad), tricky
    assert isinstance(core.pattern("*.127.0.0.1"), core.Bad)


def test_allowlist_normalizes_names_small_scope() -> None:
    """Case, one trailing dot and IDNA give one name; `%`, userinfo, backslashes, spaces, controls, empty labels and
    zones are refused, not guessed at."""
    rules = core.rules(["example.org", "bücher.example"], [])
    for same in ("example.org", "EXAMPLE.org", "example.org.", "Example.Org."):
        assert core.decide(rules, host(same), 443) == core.ALLOW, same
    assert core.decide(rules, host("BÜCHER.example"), 443) == core.ALLOW
    assert core.decide(rules, host("xn--bcher-kva.example"), 443) == core.ALLOW
    for bad in (
        "exa%6dple.org",
        "user@example.org",
        "example.org\\@evil",
        "example .org",
        "example..org",
        ".example.org",
        "example.org..",
        "exa\x00mple.org",
        "fe80::1%eth0",
        "",
        "a" * 64 + ".org",
    ):
        assert isinstance(core.normal_name(bad), core.Bad), bad


def test_allowlist_ports_small_scope() -> None:
    rules = core.rules(["example.org"], [], [443])
    assert core.decide(rules, host("example.org"), 443) == core.ALLOW
    got = core.decide(rules, host("example.org"), 80)
    assert isinstance(got, core.Refuse)
    assert got.setting == "sandbox.allow_ports"


AUTHORITIES = [
    "example.org:443",
    "example.org",
    "[::1]:443",
    "::1:443",
    "user@example.org:443",
    "example.org:+443",
    "example.org:0",
    "example.org:65536",
    "example.org:443:443",
    "example.org%2f:443",
    "EXAMPLE.org.:443",
    "[::1",
]


def test_allowlist_connect_reads_only_an_authority_with_a_port_small_scope() -> None:
    for text in AUTHORITIES:
        got = core.route(f"CONNECT {text} HTTP/1.1\r\nHost: {text}\r\n\r\n".encode())
        if text in ("example.org:443", "EXAMPLE.org.:443"):
            assert got == core.Tunnel(core.Target(core.Name("example.org"), 443)), text
        elif text == "[::1]:443":
            assert got == core.Tunnel(core.Target(core.Address("::1"), 443))
        else:
            assert isinstance(got, core.Bad), text


def test_allowlist_plain_http_host_must_match_the_url_small_scope() -> None:
    ok = core.route(b"GET http://example.org/x?y HTTP/1.1\r\nHost: example.org\r\nProxy-Connection: keep-alive\r\n\r\n")
    assert isinstance(ok, core.Forward)
    assert ok.target == core.Target(core.Name("example.org"), 80)
    assert ok.head.startswith(b"GET /x?y HTTP/1.1\r\nhost: example.org\r\n")
    assert b"proxy-connection" not in ok.head.lower()
    assert ok.head.endswith(b"connection: close\r\n\r\n")
    for head in (
        b"GET http://example.org/ HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        b"GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\nHost: evil.example\r\n\r\n",
        b"GET http://example.org/ HTTP/1.1\r\nHost: example.org:8080\r\n\r\n",
        b"GET /relative HTTP/1.1\r\nHost: example.org\r\n\r\n",
        b"GET https://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n",
        b"GET http://user@example.org/ HTTP/1.1\r\n\r\n",
        b"GET http://example.org/ HTTP/1.1\r\n Folded: x\r\n\r\n",
        b"POST http://example.org/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET http://example.org/ HTTP/2.0\r\n\r\n",
        b"GET http://example.org/ HTTP/1.1\n\n",
        b"\x05\x01\x00",  # a SOCKS5 greeting: not a request line
        b"\x05\x01\x00\r\n\r\n",
        b"GET  http://example.org/ HTTP/1.1\r\n\r\n",
    ):
        assert isinstance(core.route(head), core.Bad), head


@given(st.binary(max_size=200))
def test_allowlist_route_never_raises(data: bytes) -> None:
    """Any bytes: a route or a refusal, never an exception; what is forwarded names a host the rules can decide."""
    got = core.route(data + b"\r\n\r\n")
    if isinstance(got, core.Forward):
        assert got.head.endswith(b"\r\n\r\n")


def test_allowlist_refusal_names_the_domain_and_the_setting() -> None:
    got = core.decide(core.rules([], []), host("evil.example"), 443)
    assert isinstance(got, core.Refuse)
    response = core.refused_response(got, "evil.example:443")
    assert response.startswith(b"HTTP/1.1 403 ")
    assert b"evil.example" in response
    assert b"sandbox.allow_domains" in response


def test_allowlist_is_between_on_and_off_small_scope() -> None:
    """A project may narrow the list (remove allowed names or ports, add denied ones), never widen it, while the
    user's network is an allowlist; `tighten` names the looser key."""
    user = sandbox.Policy(network=sandbox.Network.ALLOWLIST, allow_domains=("a.org", "b.org"), deny_domains=("c.org",))
    for allow, deny in itertools.product(
        [None, (), ("a.org",), ("a.org", "b.org"), ("a.org", "x.org")], [None, (), ("c.org",), ("c.org", "d.org")]
    ):
        got = sandbox.tighten(user, sandbox.ProjectPolicy(allow_domains=allow, deny_domains=deny))
        widens = allow is not None and not set(allow) <= set(user.allow_domains)
        drops = deny is not None and "c.org" not in deny
        keys = {looser.key for looser in got.refused}
        assert ("sandbox.allow_domains" in keys) is widens
        assert ("sandbox.deny_domains" in keys) is drops
        if got.refused:
            assert got.policy == user
        else:
            assert set(got.policy.allow_domains) <= set(user.allow_domains)
            assert set(user.deny_domains) <= set(got.policy.deny_domains)
    on = sandbox.Policy(network=sandbox.Network.ON, allow_domains=())
    narrowed = sandbox.tighten(on, sandbox.ProjectPolicy(network=sandbox.Network.ALLOWLIST, allow_domains=("x.org",)))
    assert not narrowed.refused
    assert narrowed.policy.allow_domains == ("x.org",)


def test_allowlist_bwrap_argv_has_no_route_but_the_bridge() -> None:
    bridge = sandbox.Bridge("/run/net", "/usr/bin/python3", "PROGRAM")
    facts = sandbox.Facts(sandbox.Mode.WORKSPACE_WRITE, sandbox.Network.ALLOWLIST, "/w", "/t/tmp", bridge=bridge)
    argv = sandbox.bwrap_argv(facts, ["bash", "-c", "x"])
    assert "--unshare-net" in argv
    assert "--as-pid-1" in argv
    triples = [tuple(argv[i : i + 3]) for i in range(len(argv))]
    assert ("--ro-bind", "/run/net", sandbox.BRIDGE_DIR) in triples
    assert ("--setenv", "HTTPS_PROXY", sandbox.PROXY_URL) in triples
    assert argv[-4:] == ("--", "bash", "-c", "x")
    alone = sandbox.bwrap_argv(
        sandbox.Facts(sandbox.Mode.WORKSPACE_WRITE, sandbox.Network.ALLOWLIST, "/w", "/t/tmp"), ["true"]
    )
    assert "--unshare-net" in alone
    assert "--as-pid-1" not in alone  # no proxy: no way out at all
