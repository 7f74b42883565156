"""A private server that runs out of descriptors (EMFILE on accept, for real: RLIMIT_NOFILE in a child) keeps
serving once descriptors are free again, instead of ending (the daemon would stop with it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import asyncio, os, resource, socket, sys
from pathlib import Path
from eukhe.daemon.local_access import bind_private_socket, serve_private

path = Path(sys.argv[1])

async def echo(reader, writer):
    writer.write(await reader.readline())
    await writer.drain()

async def ask(text):
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(text + b"\n")
    await writer.drain()
    answer = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return answer

async def main():
    listener = bind_private_socket(path)
    server = asyncio.create_task(serve_private(listener, echo, "test"))
    assert await ask(b"one") == b"one\n"
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + 4, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    hogs = []
    try:
        while True:
            hogs.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    os.close(hogs.pop())  # one descriptor for a client: it connects, the server's accept fails with EMFILE
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(path))
    for _ in range(20):
        await asyncio.sleep(0.01)  # let the server try (and fail) to accept
    client.close()
    for fd in hogs:
        os.close(fd)
    assert not server.done(), server.exception()
    assert await asyncio.wait_for(ask(b"two"), 10) == b"two\n"
    server.cancel()
    await asyncio.gather(server, return_exceptions=True)
    listener.close()

asyncio.run(main())
"""


@pytest.mark.real
def test_a_server_out_of_descriptors_serves_again_once_they_are_free(tmp_path: Path) -> None:
    sock_dir = tmp_path / "s"
    sock_dir.mkdir(mode=0o700)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(sock_dir / "x.sock")], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
