"""A daemon worker's child watcher (eukhe/daemon/childwatch.py) with no descriptor left for a pidfd (EMFILE, for
real: RLIMIT_NOFILE in a child process) still learns the child's end, on a thread, instead of failing after the
child was spawned (asyncio's PidfdChildWatcher alone raises then, and the child is nobody's)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = r"""
import asyncio, os, subprocess, sys
from eukhe.daemon.childwatch import PidfdOrThreadWatcher
from tests.real.fd_support import descriptor_table_full

async def main():
    watcher = PidfdOrThreadWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(7)"], stdin=subprocess.PIPE)
    ended = asyncio.get_running_loop().create_future()
    with descriptor_table_full():
        try:
            os.pidfd_open(child.pid)
        except OSError as error:
            refused = error.errno
        else:
            sys.exit("a pidfd was opened past the limit: the test proves nothing")
        watcher.add_child_handler(child.pid, lambda pid, code: ended.set_result(code))
    child.stdin.close()
    code = await asyncio.wait_for(ended, 20)
    assert code == 7, code
    print("refused", refused, "ended", code)

asyncio.run(main())
"""


@pytest.mark.real
def test_a_child_the_watcher_cannot_open_a_pidfd_for_is_still_waited_for() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused 24 ended 7"), done.stdout
