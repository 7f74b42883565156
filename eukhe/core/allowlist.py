"""The network allowlist: which names a confined process may reach through eukhe's proxy, and how a request to the
proxy is read (docs/sandbox.md "The network allowlist").

With `network: allowlist` a sandbox has no route out (`--unshare-net`); its one way out is eukhe's HTTP proxy on
the host. The proxy reads one request head, asks `route` what it is (a CONNECT tunnel, a plain HTTP request to
forward, or something it refuses to read), and `decide` whether its target may be reached.

Theory of operation.
- A name is compared only in its normal form (`normal_name`): lowercase ASCII (IDNA for a non-ASCII one), one
  trailing dot dropped, labels of letters, digits, `-` and `_`. Anything else is refused, not guessed at: `%`
  (an encoding or an IPv6 zone), `@` (userinfo), `\\`, spaces, controls, empty labels. A name whose last label is
  numeric (`127.1`, `0x7f.1`, `2130706433`: what `getaddrinfo` would read as an address) must be a canonical IPv4
  address, else it is refused: the proxy never resolves a name that a resolver would take for an address.
- A pattern (`allow_domains`, `deny_domains`) is a name (exactly that name), `*.NAME` (every name below NAME, not
  NAME itself), or an IP address (exactly that address). An IP address is reached only when a pattern names it.
- `decide`: a denied name is refused whatever allows it (deny wins); then a port not in `allow_ports`; then a name no
  allow pattern matches.
- `route` reads a request head strictly (CRLF lines, token names, no folded or duplicate Host headers, not both
  Content-Length and Transfer-Encoding) and for plain HTTP writes a new head for the origin (origin-form target,
  no proxy headers, `Connection: close`): the origin reads eukhe's bytes, never the client's own head. The proxy
  speaks HTTP only: a SOCKS greeting is not a request line, so there is no second parser to disagree with.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_PORTS: tuple[int, ...] = (80, 443)
"""The ports an allowed name is reached on unless `allow_ports` says otherwise."""

DEFAULT_ALLOWED: tuple[tuple[str, str], ...] = (
    ("pypi.org", "PyPI's index"),
    ("files.pythonhosted.org", "PyPI's files"),
    ("registry.npmjs.org", "npm's registry"),
    ("registry.yarnpkg.com", "Yarn's mirror of npm's registry"),
    ("crates.io", "crates.io's API"),
    ("index.crates.io", "crates.io's sparse index"),
    ("static.crates.io", "crates.io's files"),
    ("proxy.golang.org", "the Go module proxy"),
    ("sum.golang.org", "the Go checksum database"),
    ("github.com", "GitHub (git over https, releases)"),
    ("codeload.github.com", "GitHub's archives"),
    ("objects.githubusercontent.com", "GitHub's release files"),
    ("raw.githubusercontent.com", "GitHub's raw files"),
    ("gitlab.com", "GitLab"),
)
"""The default `allow_domains`, each with what it is: package registries and code hosts, reached for reading."""

DEFAULT_ALLOWED_NAMES: tuple[str, ...] = tuple(name for name, _ in DEFAULT_ALLOWED)

MAX_NAME = 253
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
_FORBIDDEN = frozenset("%@\\/?#[]:;,\"'`<>{}|^ ")


@dataclass(frozen=True, slots=True)
class Name:
    """A host name in its normal form."""

    text: str


@dataclass(frozen=True, slots=True)
class Address:
    """An IP address, in its compressed form (`ipaddress`'s `str`)."""

    text: str


Host = Name | Address


@dataclass(frozen=True, slots=True)
class Bad:
    """Text that is no host, no pattern or no request eukhe reads: why."""

    reason: str


def normal_name(text: str) -> Host | Bad:
    """`text` as a host (see the module docstring): an `Address` for an IP literal (an IPv6 one without its
    brackets), else a `Name`; `Bad` for what is neither."""
    if not text or len(text) > 2 * MAX_NAME:
        return Bad("empty or too long")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in text):
        return Bad("a control or a space")
    if "%" in text:
        return Bad("a % (an encoding, or an IPv6 zone)")
    if ":" in text:  # only an IPv6 address has one (the port is split off before)
        return _address(text, ipaddress.IPv6Address)
    if any(char in _FORBIDDEN for char in text):
        return Bad("a character no host name has (@, \\, /, ...)")
    lowered = text.lower()
    if not lowered.isascii():
        try:
            lowered = lowered.encode("idna").decode("ascii")
        except UnicodeError:
            return Bad("not a valid international name")
    if lowered.endswith("."):
        lowered = lowered[:-1]
    labels = lowered.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return _address(lowered, ipaddress.IPv4Address)
    if len(lowered) > MAX_NAME or not all(_LABEL.fullmatch(label) for label in labels):
        return Bad("not a host name (letters, digits, - and _ in dot-separated labels)")
    return Name(lowered)


def _address(text: str, kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address]) -> Address | Bad:
    """A canonical IP literal (IPv4: four decimal parts without leading zeros; IPv6: no zone), else Bad."""
    try:
        found = kind(text)
    except ValueError:
        return Bad("a numeric name that is not a canonical IP address")
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return Address(str(found.ipv4_mapped))
    return Address(str(found))


@dataclass(frozen=True, slots=True)
class Pattern:
    """One entry of `allow_domains` or `deny_domains`: a host, and whether it stands for the names below it."""

    host: Host
    below: bool = False

    def matches(self, host: Host) -> bool:
        if isinstance(self.host, Address) or isinstance(host, Address):
            return self.host == host and not self.below
        if self.below:
            return host.text.endswith("." + self.host.text)
        return host.text == self.host.text


def pattern(text: str) -> Pattern | Bad:
    """A pattern's text read: `NAME`, `*.NAME` or an IP address (`[v6]` too)."""
    below = text.startswith("*.")
    rest = text[2:] if below else text
    if rest.startswith("[") and rest.endswith("]"):
        rest = rest[1:-1]
    host = normal_name(rest)
    if isinstance(host, Bad):
        return host
    if below and isinstance(host, Address):
        return Bad("*. stands for the names below a name, not an address")
    if below and "." not in host.text:
        return Bad("*. needs a domain with a dot (*.example.org)")
    return Pattern(host, below)


def patterns(texts: Sequence[str]) -> tuple[Pattern, ...]:
    """The patterns of valid texts (a setting is checked when it is read: see `pattern`); the invalid ones left out."""
    return tuple(found for text in texts if isinstance(found := pattern(text), Pattern))


@dataclass(frozen=True, slots=True)
class Rules:
    """What the proxy lets through: allowed and denied patterns, and the ports."""

    allow: tuple[Pattern, ...] = ()
    deny: tuple[Pattern, ...] = ()
    ports: tuple[int, ...] = DEFAULT_PORTS


def rules(allow: Sequence[str], deny: Sequence[str], ports: Sequence[int] = DEFAULT_PORTS) -> Rules:
    return Rules(patterns(allow), patterns(deny), tuple(ports))


@dataclass(frozen=True, slots=True)
class Allow:
    """The target may be reached."""


@dataclass(frozen=True, slots=True)
class Refuse:
    """The target is refused: `setting` names the key that would change it (`sandbox.allow_domains`,
    `sandbox.deny_domains`, `sandbox.allow_ports`), or `bad_request` for what the proxy will not read."""

    setting: str
    detail: str


ALLOW = Allow()


def decide(found: Rules, host: Host, port: int) -> Allow | Refuse:
    """Deny wins; then the port; then an allow pattern must match (an address only where one names it)."""
    if any(entry.matches(host) for entry in found.deny):
        return Refuse("sandbox.deny_domains", f"{host.text} is denied by sandbox.deny_domains")
    if port not in found.ports:
        return Refuse("sandbox.allow_ports", f"port {port} is not in sandbox.allow_ports")
    if any(entry.matches(host) for entry in found.allow):
        return ALLOW
    what = "the address" if isinstance(host, Address) else "the name"
    return Refuse("sandbox.allow_domains", f"{what} {host.text} is not in sandbox.allow_domains")


# ---------------------------------------------------------------------------------------------------------------------
# Reading a request to the proxy

MAX_HEAD = 65_536
"""A request head longer than this is refused (`bad_request`)."""

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(rb"HTTP/1\.[01]")
_PORT = re.compile(r"[0-9]{1,5}")
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
    }
)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes: its host and port."""

    host: Host
    port: int


@dataclass(frozen=True, slots=True)
class Tunnel:
    """A CONNECT: once allowed, the proxy answers 200 and relays bytes both ways, reading none of them."""

    target: Target


@dataclass(frozen=True, slots=True)
class Forward:
    """A plain HTTP request: once allowed, `head` goes to the origin, then the rest of the stream as it is."""

    target: Target
    method: str
    head: bytes


Route = Tunnel | Forward | Bad


def authority(text: str, default_port: int | None) -> Target | Bad:
    """`host[:port]` or `[v6][:port]` as a target; no userinfo, a decimal port of 1 to 65535."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return Bad("an unclosed [")
        host_text, rest = text[1:close], text[close + 1 :]
        if rest and not rest.startswith(":"):
            return Bad("text after the ]")
        port_text = rest[1:] if rest else None
    else:
        before, colon, after = text.rpartition(":")
        host_text, port_text = (before, after) if colon else (text, None)
        if ":" in host_text:
            return Bad("an IPv6 address must be in brackets")
    if port_text is None:
        if default_port is None:
            return Bad("no port")
        port = default_port
    elif _PORT.fullmatch(port_text) and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        return Bad("not a port")
    host = normal_name(host_text)
    if isinstance(host, Bad):
        return host
    return Target(host, port)


def head_end(data: bytes) -> int | None:
    """Where the head ends in what was read so far (past its blank line), or None if it has not yet."""
    at = data.find(b"\r\n\r\n")
    return None if at < 0 else at + 4


def route(head: bytes) -> Route:
    """What a request head (through its blank line) asks of the proxy (see the module docstring)."""
    if not head.endswith(b"\r\n\r\n") or len(head) > MAX_HEAD:
        return Bad("not a whole request head")
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _VERSION.fullmatch(parts[2]):
        return Bad("not an HTTP/1 request line")
    method, target = parts[0].decode("ascii"), parts[1]
    if not target.isascii() or any(byte < 0x21 or byte == 0x7F for byte in target):
        return Bad("a request target with a space or a control")
    fields: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            return Bad("a header line that is not NAME: VALUE")
        value = value.strip(b" \t")
        if any((byte < 0x20 and byte != 0x09) or byte == 0x7F for byte in value):
            return Bad("a control in a header")
        fields.append((name.lower(), value))
    names = [name for name, _ in fields]
    if b"content-length" in names and b"transfer-encoding" in names:
        return Bad("both Content-Length and Transfer-Encoding")
    if names.count(b"host") > 1 or names.count(b"content-length") > 1:
        return Bad("a repeated Host or Content-Length")
    text = target.decode("ascii")
    if method == "CONNECT":
        found = authority(text, None)
        return found if isinstance(found, Bad) else Tunnel(found)
    return _forward(method, text, fields)


def _forward(method: str, text: str, fields: Sequence[tuple[bytes, bytes]]) -> Forward | Bad:
    if not text.lower().startswith("http://"):
        return Bad("a plain request must name its http:// URL (https goes through CONNECT)")
    rest = text[len("http://") :]
    cut = min((at for at in (rest.find("/"), rest.find("?")) if at >= 0), default=len(rest))
    raw_authority, path = rest[:cut], rest[cut:] or "/"
    if path.startswith("?"):
        path = "/" + path
    if "#" in path:
        return Bad("a fragment in a request target")
    target = authority(raw_authority, 80)
    if isinstance(target, Bad):
        return target
    hosts = [value for name, value in fields if name == b"host"]
    if hosts:
        said = authority(hosts[0].decode("ascii", "replace"), 80)
        if said != target:
            return Bad("the Host header names another host than the URL")
    connection = {
        token.strip().lower() for name, value in fields if name == b"connection" for token in value.split(b",")
    }
    kept = [(name, value) for name, value in fields if name not in _HOP and name not in connection and name != b"host"]
    lines = [f"{method} {path} HTTP/1.1".encode("ascii"), b"host: " + raw_authority.encode("ascii")]
    lines += [name + b": " + value for name, value in kept]
    lines.append(b"connection: close")
    return Forward(target, method, b"\r\n".join(lines) + b"\r\n\r\n")


def refused_response(refusal: Refuse, target: str) -> bytes:
    """The proxy's 403 for a refused target: a body that names the target and the setting."""
    way = {
        "sandbox.allow_domains": (
            "the user can add it to sandbox.allow_domains (or start a session with --allow-domain NAME)"
        ),
        "sandbox.deny_domains": "the user can take it out of sandbox.deny_domains",
        "sandbox.allow_ports": "the user can add the port to sandbox.allow_ports",
    }.get(refusal.setting, "")
    body = f"eukhe sandbox refused {target}: {refusal.detail}. The session's network is an allowlist; {way}.\n"
    return response("403 Forbidden by eukhe's sandbox allowlist", body, f"x-eukhe-refused: {refusal.setting}\r\n")


BAD_REQUEST = "bad_request"


def bad_response(bad: Bad) -> bytes:
    """The proxy's 400 for what it will not read."""
    return response("400 Bad Request", f"eukhe's sandbox proxy refused the request: {bad.reason}\n")


def response(status: str, body: str, more: str = "") -> bytes:
    """A whole plain-text response of the proxy's own, which closes the connection."""
    data = body.encode()
    head = f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {len(data)}\r\n"
    return (head + f"connection: close\r\n{more}\r\n").encode() + data
