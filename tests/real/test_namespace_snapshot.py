"""The namespace snapshot on real kernels (spec S3 "Where the sandbox runs" 6): a kernel stopped with a snapshot
(idle culling) leaves its variables to the session's next kernel; a plain kill leaves none; a wrapped kernel writes
its snapshot at the sandbox path of the session's snapshot file, and when no mount holds that file the host asks for
no snapshot and says so. (The daemon's culling itself: tests/real/test_upkeep.py.)
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from eukhe.api import Session, Settled
from eukhe.records.settings import KernelTransport, Mount
from tests.real.kernel_support import run
from tests.real.sandboxes import SANDBOX_PYTHON, need_root
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

SET = "import json as codec\nimport threading\nx = 41\nrows = [{'a': 1}]\nlock = threading.Lock()\ndef f(): pass\nx"
GET = "(x, rows, codec.__name__, [n for n in ('lock', 'f') if n in globals()])"


async def cell(session: Session, code: str) -> Settled:
    answer = await session.ipython(code, budget_ms=60_000)
    assert isinstance(answer, Settled), answer
    return answer


async def stopped_with_snapshot(session: Session) -> int:
    """Set the variables, stop the kernel with a snapshot (as culling does); the old kernel's pid."""
    assert (await cell(session, SET)).result == "41"
    pid = session.kernel.pid
    assert pid is not None
    await session.kernel.kill(snapshot=True)
    return pid


def test_a_kernel_stopped_with_a_snapshot_leaves_its_variables_to_the_next(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await Session.create(tmp_path, root=tmp_path / "sessions")
        try:
            old = await stopped_with_snapshot(session)
            file = session.snapshot_path
            assert stat.S_IMODE(file.stat().st_mode) == 0o600  # in the session's private directory, the user's
            saved = "namespace snapshot saved: codec, rows, threading, x; not kept (functions, classes, "
            assert any(saved in line and line.endswith("f, lock") for line in session.kernel.diagnostics)
            got = await cell(session, GET)
            assert got.result == "(41, [{'a': 1}], 'json', [])", got
            assert session.kernel.pid not in (None, old)
            assert not file.exists(), "the next kernel read it and removed it"
            assert any("namespace snapshot restored: " in line for line in session.kernel.diagnostics)
            await session.kernel.kill()  # a plain kill (a restart): no snapshot
            assert not file.exists()
            assert (await cell(session, "'x' in globals()")).result == "False"
        finally:
            await session.close()

    run(scenario())


@pytest.mark.parametrize("mounted", [True, False], ids=["sessions-in-a-mount", "sessions-outside-every-mount"])
def test_a_wrapped_kernels_snapshot_goes_to_its_sandbox_path_or_is_not_asked_for(tmp_path: Path, mounted: bool) -> None:
    need_root("bubblewrap")
    need_tools("bwrap")
    work = tmp_path / "work"
    work.mkdir()
    root = work / ".sessions" if mounted else tmp_path / "sessions"
    prefix = ["bwrap", "--ro-bind", "/", "/", "--bind", str(work), "/work", "--dev", "/dev", "--proc", "/proc"]
    prefix += ["--tmpfs", "/tmp", "--die-with-parent"]
    mounts = [Mount(sandbox="/work", host=str(work))]
    transport = KernelTransport(argv_prefix=prefix, python=SANDBOX_PYTHON, path_map=mounts)

    async def scenario() -> None:
        session = await Session.create(work, root=root, kernel_transport=transport)
        try:
            await stopped_with_snapshot(session)
            outside = [line for line in session.kernel.diagnostics if "is outside every mount" in line]
            if mounted:
                assert outside == []
                assert (await cell(session, GET)).result == "(41, [{'a': 1}], 'json', [])"
                path = await cell(session, "import os\nos.environ['EUKHE_KERNEL_SNAPSHOT']")
                assert path.result == repr(f"/work/.sessions/{session.dir.name}/kernel/kernel-namespace.pickle")
            else:
                assert outside and str(session.snapshot_path) in outside[0]
                assert not any("namespace snapshot saved" in line for line in session.kernel.diagnostics)
                assert not (session.snapshot_path).exists()
                assert (await cell(session, "'x' in globals()")).result == "False"
        finally:
            await session.close()

    run(scenario())
