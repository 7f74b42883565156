"""The network allowlist (docs/sandbox.md "The network allowlist"): with `network: allowlist` a confined command
reaches an allowed name through eukhe's proxy (curl, urllib, pip from a local index, git over http, and by the
default list pip from PyPI where the machine reaches it), and every other way out fails and is recorded: plain HTTP
and CONNECT to a name not allowed, an address not named, `--noproxy`, a raw socket, UDP to any DNS server. Real
bubblewrap, a real daemon, real servers on the host's loopback (named `localhost`, which the proxy resolves on the
host; `NO_PROXY` is emptied per command, since the sandbox's own loopback is otherwise its own)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import shlex
import socket
import subprocess
import threading
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.real.conftest import DaemonEnv
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

VIA_PROXY = "NO_PROXY= no_proxy= "
"""Empties NO_PROXY for one command: `localhost` then goes through the proxy to the host's loopback."""


@dataclass
class Host:
    """An HTTP server on the host's loopback serving `root`, what it was asked, and a UDP socket that hears."""

    root: Path
    port: int
    udp_port: int
    paths: list[str] = field(default_factory=list)
    udp: list[bytes] = field(default_factory=list)


def tiny_wheel(directory: Path) -> str:
    """A wheel of one module, `eukhetiny`, without dependencies; its file name."""
    name = "eukhetiny-1.0-py3-none-any.whl"
    files = {
        "eukhetiny.py": b"VALUE = 42\n",
        "eukhetiny-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: eukhetiny\nVersion: 1.0\n",
        "eukhetiny-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += "eukhetiny-1.0.dist-info/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
        wheel.writestr("eukhetiny-1.0.dist-info/RECORD", record)
    (directory / name).write_bytes(buffer.getvalue())
    return name


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    root = tmp_path / "served"
    (root / "simple" / "eukhetiny").mkdir(parents=True)
    (root / "hello.txt").write_text("hello from the host\n")
    wheel = tiny_wheel(root)
    (root / "simple" / "eukhetiny" / "index.html").write_text(f'<a href="/{wheel}">{wheel}</a>\n')
    repo = root / "repo.git"
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "README").write_text("cloned through the proxy\n")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "update-server-info"], check=True)  # git's dumb http: static files
    found: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self) -> None:
            found.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    heard: list[bytes] = []
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                heard.append(udp.recv(512))
            except OSError:
                continue

    threads = [threading.Thread(target=server.serve_forever, daemon=True), threading.Thread(target=listen)]
    for thread in threads:
        thread.start()
    try:
        yield Host(root, int(server.server_address[1]), int(udp.getsockname()[1]), found, heard)
    finally:
        server.shutdown()
        stop.set()
        threads[1].join()
        udp.close()
        server.server_close()


def allowlist_session(world: DaemonEnv, host: Host, *, deny: list[str] | None = None) -> str:
    """A session whose network is an allowlist naming `localhost` (and the `*.corp.example` names below), with the host
    server's port allowed."""
    sandbox = {
        "network": "allowlist",
        "allow_domains": ["localhost", "*.corp.example"],
        "deny_domains": deny or ["evil.corp.example"],
        "allow_ports": [80, 443, host.port],
    }
    world.agent_dir.mkdir(parents=True, exist_ok=True)
    (world.agent_dir / "settings.json").write_text(json.dumps({"sandbox": sandbox}))
    project = world.root / "project"
    project.mkdir(exist_ok=True)
    return str(world.json("session", "create", "--cwd", str(project))["id"])


def bash(world: DaemonEnv, session: str, command: str) -> dict[str, Any]:
    code, answer = world.json_any("bash", "--session", session, "--", command)
    assert isinstance(answer, dict), (code, answer)
    assert answer["status"] == "settled", answer
    return answer


def text(answer: dict[str, Any]) -> str:
    return str(answer["output"]["text"])


def test_allowlist_reaches_an_allowed_name_with_curl_urllib_and_a_connect_tunnel(world: DaemonEnv, host: Host) -> None:
    need_tools("curl")
    session = allowlist_session(world, host)
    url = f"http://localhost:{host.port}/hello.txt"
    got = bash(world, session, f"{VIA_PROXY}curl -fsS {url}")
    assert got["exit_code"] == 0 and "hello from the host" in text(got), got
    urllib = f"import urllib.request; print(urllib.request.urlopen({url!r}).read().decode())"
    got = bash(world, session, f"{VIA_PROXY}python3 -c {shlex.quote(urllib)}")
    assert got["exit_code"] == 0 and "hello from the host" in text(got), got
    got = bash(world, session, f"{VIA_PROXY}curl -fsS --proxytunnel {url}")  # CONNECT, then GET inside
    assert got["exit_code"] == 0 and "hello from the host" in text(got), got
    assert host.paths.count("/hello.txt") == 3
    log = world.json("session", "network", session)
    assert log["network"] == "allowlist"
    allowed = [row for row in log["attempts"] if row["verdict"] == "allowed"]
    assert [(row["kind"], row["name"], row["port"]) for row in allowed] == [
        ("http", "localhost", host.port),
        ("http", "localhost", host.port),
        ("connect", "localhost", host.port),
    ]
    assert all(row["received"] > 0 and row["sent"] > 0 for row in allowed), allowed


def test_allowlist_every_other_way_out_fails_and_is_recorded(world: DaemonEnv, host: Host) -> None:
    need_tools("curl")
    session = allowlist_session(world, host)
    port = host.port
    denied_http = bash(world, session, f"{VIA_PROXY}curl -fsS http://evil.corp.example:{port}/hello.txt")
    assert denied_http["exit_code"] != 0
    assert denied_http["refusal"]["rule"] == "network_allowlist", denied_http
    assert "evil.corp.example" in denied_http["refusal"]["hint"]
    body = bash(world, session, f"{VIA_PROXY}curl -sS http://evil.corp.example:{port}/hello.txt")
    assert "evil.corp.example" in text(body) and "sandbox.deny_domains" in text(body), body
    unnamed = bash(world, session, f"{VIA_PROXY}curl -sS http://other.test:{port}/hello.txt")
    assert "sandbox.allow_domains" in text(unnamed), unnamed
    tunnel = bash(world, session, f"{VIA_PROXY}curl -fsS --proxytunnel http://evil.corp.example:{port}/hello.txt")
    assert tunnel["exit_code"] != 0 and "403" in text(tunnel), tunnel
    literal = bash(world, session, f"{VIA_PROXY}curl -sS http://127.0.0.1:{port}/hello.txt")
    assert "127.0.0.1" in text(literal) and "sandbox.allow_domains" in text(literal), literal
    noproxy = bash(world, session, f"curl -fsS --noproxy '*' http://127.0.0.1:{port}/hello.txt")
    assert noproxy["exit_code"] != 0, noproxy
    raw = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('raw ok')"
    assert "raw ok" not in text(bash(world, session, f"python3 -c {shlex.quote(raw)}"))
    out = "import socket; socket.create_connection(('1.1.1.1', 443), timeout=5); print('out ok')"
    assert "out ok" not in text(bash(world, session, f"python3 -c {shlex.quote(out)}"))
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03org\x00\x00\x01\x00\x01"
    for server in (("8.8.8.8", 53), ("127.0.0.1", host.udp_port), *resolvers()):
        send = (
            "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"try:\n    s.sendto({query!r}, {server!r}); s.settimeout(1); s.recv(512); print('dns answered')\n"
            "except OSError as e:\n    print('dns failed', e)"
        )
        said = text(bash(world, session, f"python3 -c {shlex.quote(send)}"))
        assert "dns failed" in said, (server, said)
    resolve = "import socket; socket.getaddrinfo('pypi.org', 443); print('resolved')"
    assert "resolved" not in text(bash(world, session, f"python3 -c {shlex.quote(resolve)}"))
    assert host.paths == [], "no refused request reached the host's server"
    assert host.udp == [], "no datagram left the sandbox"
    attempts = world.json("session", "network", session)["attempts"]
    refused = {(row["kind"], row["name"], row["setting"]) for row in attempts if row["verdict"] == "refused"}
    assert ("http", "evil.corp.example", "sandbox.deny_domains") in refused
    assert ("http", "other.test", "sandbox.allow_domains") in refused
    assert ("connect", "evil.corp.example", "sandbox.deny_domains") in refused
    assert ("http", "127.0.0.1", "sandbox.allow_domains") in refused
    assert all(row["verdict"] != "allowed" for row in attempts), attempts
    shown = world.cli("session", "network", session)
    assert shown.returncode == 0 and "evil.corp.example" in shown.stdout, shown


def resolvers() -> list[tuple[str, int]]:
    """The host's own DNS servers (IPv4), from its resolv.conf."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return []
    found = [line.split()[1] for line in lines if line.startswith("nameserver") and len(line.split()) > 1]
    return [(address, 53) for address in found if address.count(".") == 3]


def test_allowlist_pip_and_git_reach_an_allowed_index_and_repository(world: DaemonEnv, host: Host) -> None:
    need_tools("git")
    session = allowlist_session(world, host)
    index = f"http://localhost:{host.port}/simple"
    python = "/usr/bin/python3"
    if subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no python3 with pip at /usr/bin/python3")
    pip = f"{VIA_PROXY}{python} -m pip download --no-deps --index-url {index} -d /tmp/dl eukhetiny && ls /tmp/dl"
    got = bash(world, session, pip)
    assert got["exit_code"] == 0 and "eukhetiny-1.0-py3-none-any.whl" in text(got), text(got)
    clone = f"{VIA_PROXY}git clone -q http://localhost:{host.port}/repo.git /tmp/clone && cat /tmp/clone/README"
    got = bash(world, session, clone)
    assert got["exit_code"] == 0 and "cloned through the proxy" in text(got), got
    refused = bash(world, session, f"{VIA_PROXY}git clone -q http://evil.corp.example:{host.port}/repo.git /tmp/no")
    assert refused["exit_code"] != 0
    assert refused["refusal"]["rule"] == "network_allowlist", refused


def test_allowlist_a_project_may_only_narrow_it(world: DaemonEnv, host: Host) -> None:
    allowlist_session(world, host)
    project = world.root / "narrowed"
    (project / ".eukhe").mkdir(parents=True)
    (project / ".eukhe" / "settings.json").write_text(json.dumps({"sandbox": {"allow_domains": ["pypi.org"]}}))
    made = world.json("session", "create", "--cwd", str(project))
    assert any("sandbox.allow_domains" in notice for notice in made["notices"]), made
    got = bash(world, made["id"], f"{VIA_PROXY}curl -fsS http://localhost:{host.port}/hello.txt")
    assert got["exit_code"] == 0, "the user's policy holds whole"
    (project / ".eukhe" / "settings.json").write_text(
        json.dumps({"sandbox": {"deny_domains": ["evil.corp.example", "localhost"]}})
    )
    narrowed = world.json("session", "create", "--cwd", str(project))
    assert not narrowed["notices"], narrowed
    got = bash(world, narrowed["id"], f"{VIA_PROXY}curl -fsS http://localhost:{host.port}/hello.txt")
    assert got["exit_code"] != 0 and got["refusal"]["rule"] == "network_allowlist", got


def pypi_reachable() -> bool:
    """Whether the host reaches PyPI (the package registries are reachable in CI; elsewhere they may not be)."""
    request = urllib.request.Request("https://pypi.org/simple/six/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=10):
            return True
    except OSError:
        return False


def test_allowlist_the_default_list_lets_pip_install_from_pypi_and_refuses_another_host(world: DaemonEnv) -> None:
    """The default `allow_domains` is what a package install needs: a confined `pip install` from PyPI (pypi.org,
    files.pythonhosted.org) through the proxy works, into a venv of the working directory, and the attempts are
    recorded; a host off the list is refused with the line."""
    need_tools("curl")
    if not pypi_reachable():
        pytest.skip("PyPI is not reachable from this machine")
    project = world.root / "project"
    project.mkdir()
    session = str(world.json("session", "create", "--cwd", str(project), "--network", "allowlist")["id"])
    python = "/usr/bin/python3"
    if subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no python3 with pip at /usr/bin/python3")
    install = (
        f"{python} -m venv .v && .v/bin/pip install -q --no-cache-dir six"
        " && .v/bin/python -c 'import six; print(six.__name__)'"
    )
    got = bash(world, session, install)
    assert got["exit_code"] == 0 and text(got).strip().endswith("six"), text(got)
    attempts = world.json("session", "network", session)["attempts"]
    allowed = {a["name"] for a in attempts if a["verdict"] == "allowed"}
    assert {"pypi.org", "files.pythonhosted.org"} <= allowed, attempts
    refused = bash(world, session, "curl -fsS https://example.com/")
    assert refused["exit_code"] != 0
    assert refused["refusal"]["rule"] == "network_allowlist", refused
    assert any(
        a["name"] == "example.com" and a["verdict"] != "allowed"
        for a in world.json("session", "network", session)["attempts"]
    )
