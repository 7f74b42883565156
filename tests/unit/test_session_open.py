"""Session create and reopen ("Local access" 4; S1 store): the working dir's three refusals, the recorded dir on
reopen, settings, and a reopen after a torn last line."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from eukhe.core.bound import Off
from eukhe.core.fsmode import CWD_GONE_TEXT, CWD_MISSING_TEXT, CWD_NOT_DIR_TEXT
from eukhe.private_fs import WorkingDirError
from eukhe.records.journal import DocPut, DocRetire
from eukhe.session import Session, SessionSettings
from eukhe.store.dirs import SessionExistsError, UnknownSessionError


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda p: None, CWD_MISSING_TEXT),
        (lambda p: "", CWD_MISSING_TEXT),
        (lambda p: p / "missing", CWD_GONE_TEXT),
        (lambda p: (p / "file").write_text("x") and p / "file", CWD_NOT_DIR_TEXT),
    ],
)
def test_create_refuses_a_working_dir_with_the_specs_exact_text(tmp_path: Path, make: object, text: str) -> None:
    async def scenario() -> None:
        with pytest.raises(WorkingDirError) as caught:
            await Session.create(make(tmp_path), root=tmp_path / "sessions")  # type: ignore[operator]
        assert str(caught.value) == text
        assert not (tmp_path / "sessions").exists() or not list((tmp_path / "sessions").iterdir())

    asyncio.run(scenario())


def test_reopen_uses_the_recorded_working_dir_and_settings(tmp_path: Path) -> None:
    async def scenario() -> None:
        work = tmp_path / "work"
        work.mkdir()
        settings = SessionSettings.bounded_by(Off(), tool_blocking_budget_ms=1234)
        session = await Session.create(work, root=tmp_path / "s", settings=settings, session_id="abc")
        entry = session.append("user", "hello")
        await session.close()
        with pytest.raises(SessionExistsError):
            await Session.create(work, root=tmp_path / "s", session_id="abc")
        again = await Session.open("abc", root=tmp_path / "s")
        assert again.cwd == work
        assert again.settings == settings
        assert again.leaf == entry.id
        assert again.entry(entry.id).content == "hello"
        await again.close()
        with pytest.raises(UnknownSessionError):
            await Session.open("nope", root=tmp_path / "s")
        os.rmdir(work)
        with pytest.raises(WorkingDirError) as caught:
            await Session.open("abc", root=tmp_path / "s")
        assert str(caught.value) == CWD_GONE_TEXT

    asyncio.run(scenario())


def test_reopen_after_a_torn_last_line_reads_every_whole_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def scenario() -> None:
        work = tmp_path / "work"
        work.mkdir()
        session = await Session.create(work, root=tmp_path / "s", session_id="t")
        entry = session.append("user", "kept")
        await session.close()
        with open(tmp_path / "s" / "t" / "main.jsonl", "ab") as handle:
            handle.write(b'{"seq":99,"records":[{"t":"entry","id":"torn"')
        again = await Session.open("t", root=tmp_path / "s")
        assert again.leaf == entry.id
        assert again.last_read is not None
        assert len(again.last_read.diagnostics) == 1
        after = again.append("user", "after")
        await again.close()
        third = await Session.open("t", root=tmp_path / "s")
        assert [e.id for e in third.entries()] == [entry.id, after.id]
        await third.close()

    asyncio.run(scenario())
    assert "torn last line" in capsys.readouterr().err


def test_state_after_an_entry_and_view_state(tmp_path: Path) -> None:
    async def scenario() -> None:
        work = tmp_path / "work"
        work.mkdir()
        session = await Session.create(work, root=tmp_path / "s")
        first = session.append("user", "one")
        session.commit([DocPut(type="note", key="k", value=1)])
        second = session.append("assistant", "two")
        session.commit([DocRetire(type="note", key="k")])
        assert dict(session.state_after(first.id).documents) == {}
        assert dict(session.state_after(second.id).documents) == {("note", "k"): 1}
        assert dict(session.view_state().documents) == {}
        assert dict(session.state_after(None).documents) == {}
        await session.close()

    asyncio.run(scenario())
