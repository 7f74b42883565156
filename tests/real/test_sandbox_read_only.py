"""A `read_only` session on real bubblewrap: its working directory shows, readable and not writable, wherever it lies
(under the host's /tmp, or in an isolated child's copy under eukhe's own denied directories), and its kernel still
writes its namespace snapshot (docs/sandbox.md)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from eukhe.api import SandboxPolicy, Session, Settled
from eukhe.fs import FsError
from tests.real.kernel_support import run

pytestmark = pytest.mark.real

READ_ONLY = SandboxPolicy(mode="read_only")


async def cell(session: Session, code: str) -> Settled:
    answer = await session.ipython(code, budget_ms=120_000)
    assert isinstance(answer, Settled), answer
    return answer


def test_a_read_only_session_under_tmp_reads_its_working_directory_and_writes_nothing(tmp_path: Path) -> None:
    cwd = Path(tempfile.mkdtemp(dir="/tmp"))
    (cwd / "f").write_text("hello\n")

    async def scenario() -> None:
        session = await Session.create(cwd, root=tmp_path / "sessions", sandbox=READ_ONLY)
        try:
            read = await session.execute_bash_and_wait("cat f", 60_000)
            assert isinstance(read, Settled) and (read.exit_code, read.output.text) == (0, "hello\n"), read
            wrote = await session.execute_bash_and_wait("echo x > g", 60_000)
            assert isinstance(wrote, Settled) and wrote.exit_code != 0
            assert "Read-only file system" in wrote.output.text, wrote.output.text
            assert (await cell(session, "open('f').read()")).result == "'hello\\n'"
            assert (await session.files.read(str(cwd / "f"))).output.text == "hello\n"
            with pytest.raises(FsError) as refused:
                await session.files.write(str(cwd / "g"), "x")
            assert refused.value.reason == "sandbox"
            assert not (cwd / "g").exists()
        finally:
            await session.close()

    try:
        run(scenario(), timeout=240)
    finally:
        shutil.rmtree(cwd)


def test_a_read_only_kernel_stopped_with_a_snapshot_leaves_its_variables_to_the_next(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await Session.create(tmp_path, root=tmp_path / "sessions", sandbox=READ_ONLY)
        try:
            assert (await cell(session, "x = 41\nx")).result == "41"
            await session.kernel.kill(snapshot=True)
            assert any("namespace snapshot saved: x" in line for line in session.kernel.diagnostics)
            assert (await cell(session, "x + 1")).result == "42"
        finally:
            await session.close()

    run(scenario(), timeout=240)


def test_an_isolated_child_of_a_read_only_session_reads_its_copy_and_writes_nothing(tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "f").write_text("parent's\n")
    code = (
        "try:\n    open('new', 'w').write('x')\n    wrote = 'wrote'\nexcept OSError as error:\n"
        "    wrote = type(error).__name__\nrlm.answer([open('f').read(), wrote])"
    )

    async def scenario() -> None:
        session = await Session.create(cwd, root=tmp_path / "sessions", sandbox=READ_ONLY)
        try:
            await cell(session, f"rlm.spawn('kid', {code!r}, workspace='isolated')")
            (report,) = await session.children.collect(["kid"], timeout_ms=120_000)
            assert (report.status, report.answer) == ("answered", ["parent's\n", "OSError"]), report
            assert sorted(path.name for path in cwd.iterdir()) == ["f"]
        finally:
            await session.close()

    run(scenario(), timeout=240)
