"""`eukhe mcp --http` under clients that misbehave: a rebinding `Host`, heads past the bound, a chunked body past
the bound, and more connections than a peer may hold; each refused with its status and a JSON-RPC error, while a
well-behaved client is served. Real `eukhe mcp --http` processes (the `http_server` fixture of test_mcp_http.py) and
raw sockets, for what an HTTP client library would not send.

A peer is an IP address: the runaway clients here connect from 127.0.0.2 and up (all of 127.0.0.0/8 is this machine),
the well-behaved one from 127.0.0.1. Waits are bounded polls of real events, never bare sleeps.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest

from eukhe.core.mcp_http import MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, MAX_HEAD_BYTES, MAX_HEADER_FIELDS
from eukhe.mcp.http import MAX_BODY_BYTES, REQUEST_ARRIVAL_S
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
from tests.real.test_mcp_server import eventually, only_diagnostics, workdir

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


def test_mcp_http_a_chunked_body_past_the_bound_is_413_before_its_end(world: DaemonEnv) -> None:
    """A body without a Content-Length is counted as it comes: the 413 is answered once its bytes pass 64 MiB,
    while the client is still sending (its last chunk never sent)."""
    chunk_size = 1 << 20
    chunk = b"%x\r\n" % chunk_size + b" " * chunk_size + b"\r\n"
    sent = 0
    stop = threading.Event()

    with http_server(world, "--cwd", str(workdir(world))) as server:
        sock = connect(server)

        def send() -> None:
            nonlocal sent
            try:
                while not stop.is_set() and sent <= MAX_BODY_BYTES + 8 * chunk_size:
                    sock.sendall(chunk)
                    sent += chunk_size
            except OSError:  # the server closed the connection, or the test did
                pass

        sock.sendall(posted(server, "Transfer-Encoding: chunked"))
        sender = threading.Thread(target=send)
        sender.start()
        try:
            answer = http.client.HTTPResponse(sock)
            answer.begin()
            body = answer.read()
            at_answer = sent
        finally:
            stop.set()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            sender.join(DEADLINE_S)
        assert answer.status == 413, body
        assert_jsonrpc_error(json.loads(body), f"over {MAX_BODY_BYTES} bytes")
        assert at_answer > MAX_BODY_BYTES, "answered once the bytes passed the bound (the last chunk never came)"
        assert f"refused POST /mcp: the body is over {MAX_BODY_BYTES} bytes" in server.stderr, server.stderr

        async def served_on() -> None:
            async with http_client(server) as client:
                assert await client.text("bash", {"command": "echo served"}) == "served\n[exit 0]"

        run(served_on)
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr


# ---- connections ----------------------------------------------------------------------------------------------------


@contextmanager
def in_hand(server: HttpServer, source: str, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections from `source`, each with a request in hand: a POST whose head arrived whole and whose body
    the server waits for (it said `100 Continue`), as a client in the middle of a call holds them. Closed at the
    end. (The server closes them itself REQUEST_ARRIVAL_S after they opened: what a test does with them is done
    well within it.)"""
    opened: list[socket.socket] = []
    head = posted(server, "Content-Length: 100", "Expect: 100-continue")
    try:
        for _ in range(count):
            sock = connect(server, source)
            opened.append(sock)
            sock.sendall(head)
            said = b""
            while b"\r\n\r\n" not in said:
                piece = sock.recv(1024)
                assert piece, f"closed before its request was in hand: {said!r}"
                said += piece
            assert said.startswith(b"HTTP/1.1 100 "), said
        yield opened
    finally:
        for sock in opened:
            sock.close()


def refusal(server: HttpServer, source: str) -> tuple[int, dict[str, str], Any]:
    """The answer to a new connection from `source` that sends nothing."""
    return parsed(exchange(server, source=source))


def served(server: HttpServer, source: str) -> int:
    """The status of a request without a token on a new connection from `source` (401 once it is served)."""
    return parsed(exchange(server, request(server, "GET", "Connection: close"), source=source))[0]


def test_mcp_http_connections_past_a_peers_bound_are_429_while_other_clients_are_served(world: DaemonEnv) -> None:
    started = 0.0

    async def scenario(server: HttpServer) -> None:
        nonlocal started
        # the well-behaved clients, from 127.0.0.1, opened before the runaway starts (each opens a session: slow)
        async with http_client(server) as client, http_client(server) as other:
            started = time.monotonic()
            with in_hand(server, "127.0.0.2", MAX_CONNECTIONS_PER_PEER) as held:
                status, headers, error = refusal(server, "127.0.0.2")
                assert status == 429, error
                assert headers["retry-after"] == "1" and headers["connection"] == "close"
                assert_jsonrpc_error(error, "too many connections from your address")
                async with httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address="127.0.0.2")) as http:
                    answer = await http.post(server.url, json=INITIALIZE, headers={"Accept": ACCEPT})
                    assert answer.status_code == 429, "what an HTTP client reads, its request sent"
                    assert answer.headers["retry-after"] == "1"

                # another peer is served meanwhile: its clients, and a new connection of its
                assert [tool.name for tool in (await client.session.list_tools()).tools]
                assert await other.text("bash", {"command": "echo other"}) == "other\n[exit 0]"
                assert served(server, "127.0.0.1") == 401

                # one of the runaway's connections ends: its peer gets a place again
                held.pop().close()
                await eventually(lambda: served(server, "127.0.0.2") == 401, "127.0.0.2 served again")
                # an idle connection makes room for a new one of its peer (h11 would wait on it in vain)
                with connect(server, "127.0.0.2") as idle:
                    assert served(server, "127.0.0.2") == 401, "the idle connection gave its place"
                    assert closed_by_the_server(idle, DEADLINE_S) == b"", "closed with no answer: nothing asked"
                with in_hand(server, "127.0.0.2", 1):
                    assert refusal(server, "127.0.0.2")[0] == 429, "all in hand again"
            assert time.monotonic() - started < REQUEST_ARRIVAL_S, "the connections in hand were not closed meanwhile"

    with http_server(world, "--cwd", str(workdir(world))) as server:
        run(lambda: scenario(server))
        assert "refused a connection from 127.0.0.2: refuse_peer" in server.stderr, server.stderr
        assert "closed an idle connection from 127.0.0.2 to make room for one from 127.0.0.2" in server.stderr
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
        only_diagnostics(server.stderr)


def test_mcp_http_connections_past_the_total_are_503(world: DaemonEnv) -> None:
    peers = [f"127.0.0.{2 + n}" for n in range(MAX_CONNECTIONS // MAX_CONNECTIONS_PER_PEER)]
    with http_server(world, "--cwd", str(workdir(world))) as server, contextlib.ExitStack() as stack:
        started = time.monotonic()
        held = [stack.enter_context(in_hand(server, peer, MAX_CONNECTIONS_PER_PEER)) for peer in peers]
        status, headers, error = refusal(server, "127.0.0.100")
        assert status == 503, error
        assert headers["retry-after"] == "1"
        assert_jsonrpc_error(error, f"holds {MAX_CONNECTIONS} connections", code=types.INTERNAL_ERROR)  # a 5xx
        held[0].pop().close()
        run(lambda: eventually(lambda: served(server, "127.0.0.100") == 401, "a place again"))
        assert time.monotonic() - started < REQUEST_ARRIVAL_S, "the connections in hand were not closed meanwhile"
    assert "refused a connection from 127.0.0.100: refuse_full" in server.stderr, server.stderr
