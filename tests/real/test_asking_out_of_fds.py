"""A worker that asks its supervisor while it has no descriptor left (EMFILE, for real: RLIMIT_NOFILE in a child
process) is out of resources, not facing a daemon that went away. Taken for the second, a code child whose run
failed then looked like one whose host was stopping: the roster left it `running` with no run, and a delete of it
waited for its end forever (the soak's `children.delete` that never answered)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import asyncio, socket, sys
from pathlib import Path
from eukhe.daemon.asking import ask
from eukhe.daemon.children import DaemonHost
from eukhe.daemon.replies import DaemonError
from eukhe.records.daemon import Pong
from tests.real.fd_support import descriptor_table_full

async def main():
    path = Path(sys.argv[1])
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(path))
    listening.listen()  # a daemon that is there: only this process is short of descriptors
    with descriptor_table_full():
        try:
            await ask(path, "ping", {}, Pong)
        except DaemonError as error:
            code = error.code
        else:
            sys.exit("a connection was made past the limit: the test proves nothing")
        stopping = await DaemonHost(path).stopping()
    print(code, "stopping" if stopping else "not stopping")

asyncio.run(main())
"""


@pytest.mark.real
def test_a_worker_out_of_descriptors_is_out_of_resources_and_does_not_take_its_daemon_for_stopping(
    tmp_path: Path,
) -> None:
    socket = str(tmp_path / "daemon.sock")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, socket], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["resource_exhausted", "not", "stopping"], done.stdout
