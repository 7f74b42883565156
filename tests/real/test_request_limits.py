"""Large requests, end to end: a `write` of megabytes lands whole, and a request over the daemon's bound
(`MAX_REQUEST_BYTES`) is refused `too_large` before it is sent, naming the field and the limit, while the session
and its worker live on and answer the next call. Through the MCP server over stdio (the real client), the CLI
(`eukhe fs write`, `eukhe bash`) and the daemon's Python client, each test with a private daemon; and a line over
the bound that a client sends all the same is answered under its id.
"""

from __future__ import annotations

import json
import socket
import subprocess
from typing import Any

import anyio
import pytest

from eukhe.daemon.client import connect
from eukhe.daemon.wire import MAX_ARGUMENT_BYTES, MAX_LINE_READ_BYTES, MAX_REQUEST_BYTES
from eukhe.errors import RequestTooLargeError
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import mcp_server, text_of, workdir
from tests.real.test_mcp_tool_calls import worker_pid

pytestmark = pytest.mark.real

MIB = 1 << 20
LIMIT_WORDS = f"{MAX_REQUEST_BYTES} bytes (32 MiB) a request to the daemon carries"
COMMAND_LIMIT_WORDS = f"{MAX_ARGUMENT_BYTES} bytes (128 KiB) one argument of a program may have on Linux"


def two_mib_of_lines() -> str:
    """2 MiB and more of numbered lines: past the daemon's old 1 MiB bound, within the new one."""
    lines = [f"line {n:07d} " + "abcdefghij" * 5 for n in range(1, 2 * MIB // 60 + 2)]
    text = "\n".join(lines) + "\n"
    assert len(text.encode()) > 2 * MIB
    return text


def over_the_bound() -> str:
    """A text one byte past the bound: no request can carry it."""
    return "x" * (MAX_REQUEST_BYTES + 1)


def test_mcp_write_of_2_mib_lands_whole_and_over_the_bound_is_too_large_naming_the_field(world: DaemonEnv) -> None:
    cwd = workdir(world)
    text = two_mib_of_lines()

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            written = await server.call("write", {"path": "big.txt", "content": text})
            assert not written.is_error, text_of(written)
            assert written.structured_content["bytes_written"] == len(text.encode())
            assert (cwd / "big.txt").read_text() == text
            pid = worker_pid(world, server.session)

            too_big = await server.call("write", {"path": "huge.txt", "content": over_the_bound()})
            assert too_big.is_error
            said = text_of(too_big)
            assert said.startswith("too_large: write: content "), said
            assert LIMIT_WORDS in said, said
            assert not (cwd / "huge.txt").exists()

            for size in (MAX_ARGUMENT_BYTES + 1, 2 * MIB, MAX_REQUEST_BYTES + 1):  # bash gets it as one argument
                command = await server.call("bash", {"command": "#" + "x" * (size - 1)})
                assert command.is_error
                said = text_of(command)
                assert said.startswith(f"too_large: bash: command is too large: {size} bytes, over the "), said
                assert COMMAND_LIMIT_WORDS in said, said
            within = await server.text("bash", {"command": "#" + "x" * (MAX_ARGUMENT_BYTES - 10) + "\necho ran"})
            assert within == "ran\n[exit 0]"

            assert await server.text("bash", {"command": "wc -c < big.txt"}) == f"{len(text.encode())}\n[exit 0]"
            assert worker_pid(world, server.session) == pid, "the session's worker lived on"

    anyio.run(scenario)


def refusal(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert completed.returncode == 2, (completed.returncode, completed.stderr[-2000:])
    answer: dict[str, Any] = json.loads(completed.stdout)
    return answer


def test_cli_write_of_2_mib_lands_whole_and_over_the_bound_is_too_large_naming_the_field(world: DaemonEnv) -> None:
    cwd = workdir(world)
    session = world.cli("session", "create", "--cwd", str(cwd)).stdout.strip()
    text = two_mib_of_lines()
    source = world.root / "source.txt"
    source.write_text(text)

    written = world.json("fs", "write", "--session", session, str(cwd / "big.txt"), str(source))
    assert written["bytes_written"] == len(text.encode())
    assert (cwd / "big.txt").read_text() == text
    pid = worker_pid(world, session)

    source.write_text(over_the_bound())
    too_big = refusal(world.cli("fs", "write", "--session", session, "--json", str(cwd / "huge.txt"), str(source)))
    assert (too_big["error"], too_big["field"]) == ("too_large", "content"), too_big
    assert too_big["details"]["limit"] == MAX_REQUEST_BYTES
    assert too_big["details"]["size"] > MAX_REQUEST_BYTES
    assert LIMIT_WORDS in too_big["message"], too_big
    assert not (cwd / "huge.txt").exists()

    words = ["x" * (100 * 1024)] * 2  # two arguments of this command line, one of the command it makes
    command = refusal(world.cli("bash", "--session", session, "--json", "--", ":", *words))
    assert (command["error"], command["field"]) == ("too_large", "command"), command
    assert command["details"] == {"limit": MAX_ARGUMENT_BYTES, "size": len(" ".join([":", *words]))}
    assert COMMAND_LIMIT_WORDS in command["message"], command
    plain = world.cli("bash", "--session", session, "--", ":", *words)
    assert plain.returncode == 2 and plain.stderr.startswith("eukhe: bash: command is too large: "), plain.stderr

    echoed = world.cli("bash", "--session", session, "--", "echo next; wc -c < big.txt")
    assert echoed.stdout == f"next\n{len(text.encode())}\n", echoed.stderr
    assert worker_pid(world, session) == pid, "the session's worker lived on"


def test_the_python_client_refuses_a_request_over_the_bound_before_sending_it(world: DaemonEnv) -> None:
    cwd = workdir(world)
    session = world.cli("session", "create", "--cwd", str(cwd)).stdout.strip()
    pid = worker_pid(world, session)
    with connect(str(world.socket), autostart=False) as client:
        with pytest.raises(RequestTooLargeError) as command:
            client.call("bash", {"session": session, "command": "# " + over_the_bound()})
        assert (command.value.code, command.value.field) == ("too_large", "command")
        assert command.value.limit == MAX_ARGUMENT_BYTES
        assert str(command.value).startswith("bash: command is too large: ")
        assert COMMAND_LIMIT_WORDS in str(command.value)
        with pytest.raises(RequestTooLargeError) as content:
            client.call("fs.write", {"session": session, "path": str(cwd / "huge.txt"), "content": over_the_bound()})
        assert (content.value.field, content.value.limit) == ("content", MAX_REQUEST_BYTES)
        assert content.value.size > MAX_REQUEST_BYTES and LIMIT_WORDS in str(content.value)
        answer = client.call("bash", {"session": session, "command": "echo same connection"})
        assert answer["output"]["text"] == "same connection\n", answer
    assert not (cwd / "huge.txt").exists()
    assert worker_pid(world, session) == pid, "the session's worker lived on"


def test_a_direct_line_over_the_bound_is_answered_oversized_under_its_id_and_the_connection_goes_on(
    world: DaemonEnv,
) -> None:
    """A client that skips the check (any program on the socket) still gets an answer under its request's id, not a
    reply it cannot place."""
    world.cli("daemon", "start")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(world.socket))
        sock.settimeout(120)
        line = b'{"v":1,"id":41,"op":"ping","args":{"pad":"' + b"x" * MAX_LINE_READ_BYTES + b'"}}\n'
        sock.sendall(line + b'{"v":1,"id":42,"op":"ping","args":{}}\n')
        replies = read_lines(sock, 2)
    first, second = (json.loads(reply) for reply in replies)
    assert (first["id"], first["ok"], first["error"]["code"]) == (41, False, "oversized"), first
    assert (second["id"], second["ok"]) == (42, True), second


def read_lines(sock: socket.socket, count: int) -> list[bytes]:
    """The next `count` lines the peer sends."""
    buffer = b""
    while buffer.count(b"\n") < count:
        chunk = sock.recv(1 << 16)
        assert chunk, buffer
        buffer += chunk
    return buffer.split(b"\n")[:count]
