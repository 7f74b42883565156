"""`eukhe mcp --http` under clients that misbehave: a rebinding `Host`, heads past the bound; each refused with its
status and a JSON-RPC error, while a well-behaved client is served. Real `eukhe mcp --http` processes (the
`http_server` fixture of test_mcp_http.py) and raw sockets, for what an HTTP client library would not send.
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import mcp_types as types
import pytest

from eukhe.core.mcp_http import MAX_HEAD_BYTES, MAX_HEADER_FIELDS
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_http import (
    ACCEPT,
    DEADLINE_S,
    INITIALIZE,
    HttpServer,
    closed_by_the_server,
    http_client,
    http_server,
    run,
)
from tests.real.test_mcp_server import workdir

pytestmark = pytest.mark.real


def address(server: HttpServer) -> tuple[str, int]:
    host, port = re.fullmatch(r"http://([^:/]+):(\d+)/mcp", server.where).groups()  # type: ignore[union-attr]
    return host, int(port)


def connect(server: HttpServer, source: str = "127.0.0.1") -> socket.socket:
    """A TCP connection to the server from `source` (an address of this machine)."""
    return socket.create_connection(address(server), timeout=DEADLINE_S, source_address=(source, 0))


def exchange(server: HttpServer, *pieces: bytes, source: str = "127.0.0.1") -> bytes:
    """Send `pieces` on a new connection, then everything the server sends until it closes the connection."""
    with connect(server, source) as sock:
        for piece in pieces:
            sock.sendall(piece)
        return closed_by_the_server(sock, DEADLINE_S)


def parsed(answer: bytes) -> tuple[int, dict[str, str], Any]:
    """The status, headers (lower-case names) and JSON body of a whole HTTP answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    assert len(body) == int(headers["content-length"]), answer
    return int(status_line.split(" ")[1]), headers, json.loads(body)


def assert_jsonrpc_error(error: Any, *words: str, code: int = types.INVALID_REQUEST) -> None:
    """A JSON-RPC error answer of the server's own (no id; Invalid Request, as for every 4xx, unless `code`), whose
    message has `words`."""
    assert error["jsonrpc"] == "2.0" and error["id"] is None, error
    assert error["error"]["code"] == code, error
    for word in words:
        assert word in error["error"]["message"], (word, error)


def request(server: HttpServer, method: str = "GET", *headers: str, host: str = "127.0.0.1") -> bytes:
    """A request's head (no body) to the endpoint, its `Host` and these header lines."""
    lines = [f"{method} /mcp HTTP/1.1", f"Host: {host}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def posted(server: HttpServer, *headers: str) -> bytes:
    """The head of a POST with the server's token, as an MCP client sends it, and these header lines."""
    return request(
        server,
        "POST",
        f"Authorization: Bearer {server.token}",
        "Content-Type: application/json",
        f"Accept: {ACCEPT}",
        *headers,
    )


# ---- the Host header ------------------------------------------------------------------------------------------------


def test_mcp_http_a_rebinding_host_is_403_before_the_token_and_a_loopback_host_passes(world: DaemonEnv) -> None:
    async def door(server: HttpServer) -> None:
        _, port = address(server)
        good = {"Authorization": f"Bearer {server.token}", "Accept": ACCEPT}
        async with server.http() as http:
            for rebound in (
                f"evil.example:{port}",
                "evil.example",
                f"localhost.evil.example:{port}",
                f"127.0.0.1.nip.io:{port}",
                f"10.0.0.1:{port}",
                f"[::2]:{port}",
                "localhost:",
                "user@localhost",
            ):
                answer = await http.post(server.url, json=INITIALIZE, headers={**good, "Host": rebound})
                assert answer.status_code == 403, (rebound, answer.status_code, answer.text)
                assert_jsonrpc_error(answer.json(), "Host header")
                no_token = await http.post(server.url, json=INITIALIZE, headers={"Accept": ACCEPT, "Host": rebound})
                assert no_token.status_code == 403, "the Host is judged before the token"
            bad_origin = await http.post(
                server.url, json=INITIALIZE, headers={"Host": "evil.example", "Origin": "http://evil.example"}
            )
            assert "Host header" in bad_origin.json()["error"]["message"], "and before the Origin"

            for local in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}", "127.0.0.1",
                          "localhost", "127.0.0.1:1", f"127.1.2.3:{port}"):  # fmt: skip
                past = await http.post(server.url, json=INITIALIZE, headers={"Accept": ACCEPT, "Host": local})
                assert past.status_code == 401, (local, past.text)  # past the Host: the token is looked at
            opened = await http.post(server.url, json=INITIALIZE, headers={**good, "Host": f"localhost:{port}"})
            assert opened.status_code == 200, opened.text
            assert "mcp-session-id" in opened.headers

    with http_server(world, "--cwd", str(workdir(world))) as server:
        run(lambda: door(server))
        # HTTP/1.0 may leave the Host out; HTTP/1.1 may not (h11 refuses that with a 400 of its own)
        status, _, error = parsed(exchange(server, b"POST /mcp HTTP/1.0\r\nContent-Length: 0\r\n\r\n"))
        assert status == 403, error
        assert_jsonrpc_error(error, "Host header")
        status, _, error = parsed(exchange(server, b"GET /mcp HTTP/1.1\r\n\r\n"))
        assert status == 400, error
        assert_jsonrpc_error(error, "not HTTP/1.1", "Host")
        _, port = address(server)
        assert f"refused POST /mcp: bad_host (Host 'evil.example:{port}')" in server.stderr, server.stderr
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr

    async def unix(server: HttpServer) -> None:  # no browser reaches a unix socket: no Host is checked there
        async with server.http() as http:
            answer = await http.post(server.url, json=INITIALIZE, headers={"Accept": ACCEPT, "Host": "evil.example"})
            assert answer.status_code == 401, answer.text

    with http_server(world, "--cwd", str(workdir(world)), address=f"unix:{world.root / 'mcp.sock'}") as on_unix:
        run(lambda: unix(on_unix))


# ---- heads and bodies -----------------------------------------------------------------------------------------------


def test_mcp_http_a_head_past_its_bound_is_431_whether_it_arrives_in_pieces_or_whole(world: DaemonEnv) -> None:
    with http_server(world, "--cwd", str(workdir(world))) as server:
        start = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        # still arriving past 16 KiB (no end in sight): h11 stops reading it
        status, headers, error = parsed(exchange(server, start, b"X-Pad: " + b"a" * MAX_HEAD_BYTES))
        assert status == 431, error
        assert headers["connection"] == "close"
        assert_jsonrpc_error(error, f"over {MAX_HEAD_BYTES} bytes or {MAX_HEADER_FIELDS} header fields")
        # whole, within the bytes but one field too many: the door counts them
        fields = [f"X-F{n}: v" for n in range(MAX_HEADER_FIELDS - 2)]  # with Host and Connection, the bound exactly
        status, _, error = parsed(exchange(server, request(server, "GET", *fields, "Connection: close")))
        assert status == 401, "a head at the bound is read on: this one has no token"
        status, _, error = parsed(exchange(server, request(server, "GET", *fields, "Connection: close", "X-1: v")))
        assert status == 431, error
        assert_jsonrpc_error(error, "431")
        # whole and past 16 KiB, however it arrives (in one read: the door measures it; in several: h11 does)
        padded = request(server, "GET", "Connection: close", "X-Pad: " + "a" * MAX_HEAD_BYTES)
        status, _, error = parsed(exchange(server, padded))
        assert status == 431, error

        async def served_on() -> None:
            async with http_client(server) as client:
                assert await client.text("bash", {"command": "echo served"}) == "served\n[exit 0]"

        run(served_on)
        assert "refused a request from 127.0.0.1: the request's head is over" in server.stderr, server.stderr
        assert "refused GET /mcp: head_too_large" in server.stderr, server.stderr
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
