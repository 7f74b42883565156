"""A Local kernel's `bash()` process groups are reaped from the session's journal, not from memory
(spec S3 sandbox 8): when the host and its kernel are both killed, the groups the kernel started live on; the next
open of the session finds them in its journal and ends them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from eukhe.api import Session
from eukhe.procs import group_alive
from tests.real.kernel_support import run

pytestmark = pytest.mark.real

HOST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from eukhe.api import SandboxPolicy, Session

    async def main() -> None:
        root, work = Path(sys.argv[1]), sys.argv[2]
        session = await Session.create(work, root=root, session_id="groups", sandbox=SandboxPolicy(mode="off"))
        answer = await session.ipython(
            "import os\\nfrom eukhe_kernel.api import bash_background\\n"
            "child = bash_background('sleep 600')\\n(os.getpid(), child.pid)",
            budget_ms=30_000,
        )
        print(answer.result, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def test_a_reopen_reaps_the_bash_groups_a_killed_hosts_kernel_left(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path / "sessions"), str(work)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        kernel_pid, group = eval(host.stdout.readline())
        assert group_alive(group)
        os.kill(kernel_pid, signal.SIGKILL)  # the kernel cannot reap its groups: it is gone first
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=10)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()
    assert group_alive(group)  # nothing in memory is left to reap it

    async def reopen() -> None:
        session = await Session.open("groups", root=tmp_path / "sessions")
        try:
            assert session.view_state().of_type("eukhe.kernel_group") == {}
        finally:
            await session.close()

    run(reopen())
    deadline = time.monotonic() + 10
    while group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.02)  # a SIGKILLed group takes a moment to be gone (bounded)
    assert not group_alive(group)
