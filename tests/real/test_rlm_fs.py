"""`rlm` in every cell and the file tools everywhere: a cell's `rlm.fs.*` are host requests served
in the session's working directory, bounded like every output; `eukhe fs ...` and `session.files` answer the same."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from eukhe.api import Session, SessionSettings, Settled
from eukhe.core.bound import Keep, On, OutputLimits
from eukhe.records.cli import CliError
from eukhe.records.fs import EditAnswer, GlobAnswer, GrepAnswer, ReadAnswer, WriteAnswer
from tests.real.conftest import DaemonEnv
from tests.real.kernel_support import run

pytestmark = pytest.mark.real


async def cell(session: Session, code: str) -> Settled:
    answer = await session.ipython(code, budget_ms=30_000)
    assert isinstance(answer, Settled), answer
    assert answer.error is None, answer.error
    return answer


def test_rlm_is_in_every_cell_and_its_file_tools_are_served_in_the_sessions_cwd(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\n")

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            read = await cell(session, "import rlm as imported\nassert imported is rlm\nrlm.fs.read('notes.txt').text")
            assert read.result == repr("alpha\nbeta\n")
            wrote = await cell(session, "rlm.fs.write('made.txt', 'one\\n').created")
            assert wrote.result == "True"
            assert (work / "made.txt").read_text() == "one\n"
            patch = "*** Begin Patch\\n*** Update File: made.txt\\n@@\\n-one\\n+two\\n*** End Patch\\n"
            edited = await cell(session, f"[c['action'] for c in rlm.fs.edit('{patch}').changes]")
            assert edited.result == "['updated']"
            assert (work / "made.txt").read_text() == "two\n"
            found = await cell(session, "rlm.fs.grep('beta').text")
            assert found.result == repr("notes.txt:2:beta\n")
            listed = await cell(session, "rlm.fs.glob('*.txt').text")
            assert listed.result == repr("made.txt\nnotes.txt\n")
            # Relative paths start at the kernel's current directory when it asks.
            (work / "sub").mkdir()
            (work / "sub" / "deep.txt").write_text("deep\n")
            moved = await cell(session, "import os\nos.chdir('sub')\nrlm.fs.read('deep.txt').text")
            assert moved.result == repr("deep\n")
            refused = await cell(
                session,
                "try:\n    rlm.fs.read('missing.txt')\nexcept rlm.FsError as e:\n    out = (e.reason, e.version)\nout",
            )
            assert refused.result == repr(("not_found", "transport@1"))
        finally:
            await session.close()

    run(scenario())


def test_a_cells_file_answer_is_bounded_with_the_notice_and_the_artifact(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "big.txt").write_text("".join(f"line {n}\n" for n in range(10_000)))
    settings = SessionSettings.bounded_by(On(OutputLimits(200, 5, Keep.TAIL)))

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions", settings=settings)
        try:
            answer = await cell(session, "a = rlm.fs.read('big.txt')\n(a.output.bytes_kept, a.output.lines_kept)")
            assert answer.result == "(35, 5)"  # the head: a file reads from its start
            shown = await cell(session, "str(a)")  # the text, then the notice
            assert shown.result is not None
            assert eval(shown.result).startswith("line 0\nline 1\nline 2\nline 3\nline 4\n\n[output truncated")
            artifact = await cell(session, "a.output.artifact")
            assert artifact.result is not None
            assert Path(eval(artifact.result)).read_text() == (work / "big.txt").read_text()
        finally:
            await session.close()

    run(scenario())


def test_the_python_api_answers_the_same_records(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("x\n")

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            read = await session.files.read("a.txt")
            assert (read.output.text, read.total_lines) == ("x\n", 1)
            assert (await session.files.write("b.txt", "y\n")).created
            assert (await session.files.glob("*.txt")).count == 2
            assert (await session.files.grep("y")).matches == 1
            assert (await session.files.grep("y", glob="*.nothing")).matches == 0
        finally:
            await session.close()

    run(scenario())


def test_the_cli_fs_commands_answer_their_records(world: DaemonEnv) -> None:
    project = world.root / "project"
    project.mkdir()
    (project / "a.txt").write_text("one\ntwo\n")
    session = world.json("session", "create", "--cwd", str(project))["id"]
    a = str(project / "a.txt")
    read = msgspec.convert(world.json("fs", "read", "--session", session, a, "--offset", "2"), ReadAnswer)
    assert read.output.text == "two\n"
    wrote = msgspec.convert(
        world.json("fs", "write", "--session", session, str(project / "b.txt"), "--content", "b\n"), WriteAnswer
    )
    assert wrote.created
    patch = world.root / "p.patch"
    patch.write_text(f"*** Begin Patch\n*** Delete File: {project / 'b.txt'}\n*** End Patch\n")
    edited = msgspec.convert(world.json("fs", "edit", "--session", session, str(patch)), EditAnswer)
    assert [c.action for c in edited.changes] == ["deleted"]
    found = msgspec.convert(world.json("fs", "grep", "--session", session, "two", str(project)), GrepAnswer)
    assert found.output.text == "a.txt:2:two\n"
    listed = msgspec.convert(world.json("fs", "glob", "--session", session, "*", str(project)), GlobAnswer)
    assert listed.output.text == "a.txt\n"
    code, error = world.json_error("fs", "read", "--session", session, str(project / "nope"))
    assert code == 1
    refusal = msgspec.convert(error, CliError)
    assert refusal.error == "fs_error"
    assert refusal.details == {"reason": "not_found", "path": str(project / "nope"), "version": "transport@1"}
    plain = world.cli("fs", "read", "--session", session, a)
    assert (plain.returncode, plain.stdout) == (0, "one\ntwo\n")
    assert (
        json.loads(world.cli("fs", "glob", "--session", session, "*.md", str(project), "--json").stdout)["count"] == 0
    )
