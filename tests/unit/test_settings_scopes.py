"""Settings with scopes: the user's `<agent dir>/settings.json`, then the project's
`<cwd>/.eukhe/settings.json`; strict (an unknown key names the file and the key); `kernel_transport` is the user's
alone (in a project file it is refused with a diagnostic naming the file, and the session starts Local); the
session records the transport it started with."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from eukhe.api import Session
from eukhe.errors import InputError
from eukhe.records.settings import Limits
from eukhe.session.settings import load_settings

TRANSPORT = {"argv_prefix": ["setsid", "-w"], "path_map": [{"sandbox": "/work", "host": "/srv"}]}


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "agent"
    directory.mkdir()
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(directory))
    return directory


def create(work: Path, root: Path) -> Session:
    return asyncio.run(Session.create(work, root=root))


def project(tmp_path: Path, settings: dict[str, object] | None = None) -> Path:
    work = tmp_path / "work"
    (work / ".eukhe").mkdir(parents=True, exist_ok=True)
    if settings is not None:
        (work / ".eukhe" / "settings.json").write_text(json.dumps(settings))
    return work


def test_the_user_sets_the_transport_and_the_project_overrides_the_limits(agent: Path, tmp_path: Path) -> None:
    (agent / "settings.json").write_text(
        json.dumps({"kernel_transport": TRANSPORT, "tool_blocking_budget_ms": 7, "truncation": "off"})
    )
    work = project(tmp_path, {"truncation": {"max_bytes": 10, "max_lines": 2, "keep": "head"}})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            transport = session.kernel_transport
            assert transport is not None
            assert (transport.argv_prefix, transport.python, transport.path_map[0].sandbox) == (
                ["setsid", "-w"],
                "python3",
                "/work",
            )
            assert session.settings.tool_blocking_budget_ms == 7
            assert session.settings.truncation == Limits(max_bytes=10, max_lines=2, keep="head")
        finally:
            await session.close()
        reopened = await Session.open(session.id, root=tmp_path / "sessions")
        try:
            assert reopened.kernel_transport == transport  # recorded in the header: the transport it started with
        finally:
            await reopened.close()

    asyncio.run(scenario())


def test_a_projects_kernel_transport_is_refused_by_name_and_the_session_starts_local(
    agent: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = project(tmp_path, {"kernel_transport": TRANSPORT})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            assert session.kernel_transport is None
            (notice,) = [entry for entry in session.entries() if entry.kind == "notice"]
            assert str(work / ".eukhe" / "settings.json") in notice.content["message"]
            assert "kernel_transport" in notice.content["message"]
        finally:
            await session.close()

    asyncio.run(scenario())
    assert "kernel_transport is a user setting" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("where", "content", "field"),
    [
        ("user", {"kernelTransport": TRANSPORT}, "kernelTransport"),
        ("user", {"kernel_transport": {**TRANSPORT, "argvPrefix": ["x"]}}, "kernel_transport.argvPrefix"),
        ("user", {"kernel_transport": {"path_map": []}}, "kernel_transport.argv_prefix"),
        ("project", {"tool_blocking_budget_ms": "soon"}, "tool_blocking_budget_ms"),
        ("project", {"colour": "blue"}, "colour"),
    ],
)
def test_a_bad_settings_file_is_refused_naming_the_file_and_the_key(
    agent: Path, tmp_path: Path, where: str, content: dict[str, object], field: str
) -> None:
    work = project(tmp_path)
    path = agent / "settings.json" if where == "user" else work / ".eukhe" / "settings.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InputError) as refused:
        create(work, tmp_path / "sessions")
    assert (refused.value.code, refused.value.field) == ("bad_setting", field)
    assert str(path) in str(refused.value)
    if field == "kernelTransport":
        assert refused.value.hint == "kernel_transport"


def test_the_users_settings_may_be_a_symlink_but_a_fifo_or_a_file_over_the_cap_is_refused_at_once(
    agent: Path, tmp_path: Path
) -> None:
    """The user's own file may be a symlink (a dotfile manager's), read through it; a FIFO there (a read would
    wait for a writer) or a file over the 1 MiB cap is a `bad_setting` naming the file and why, never a hang."""
    work = project(tmp_path)
    dotfiles = tmp_path / "dotfiles" / "eukhe.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps({"tool_blocking_budget_ms": 9}))
    user_file = agent / "settings.json"
    user_file.symlink_to(dotfiles)
    assert load_settings(work).settings.tool_blocking_budget_ms == 9
    user_file.unlink()
    os.mkfifo(user_file)
    with pytest.raises(InputError) as refused:
        load_settings(work)
    assert refused.value.code == "bad_setting" and str(user_file) in str(refused.value)
    assert "not a regular file" in str(refused.value)
    user_file.unlink()
    user_file.write_text(json.dumps({"tool_blocking_budget_ms": 9}) + " " * (1 << 20))
    with pytest.raises(InputError) as refused:
        load_settings(work)
    assert "larger than 1 MiB" in str(refused.value)


def test_the_home_directory_as_cwd_reads_the_users_settings_once_as_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When `<cwd>/.eukhe` is the agent dir (the cwd is the home directory), its settings file is the user's: read
    as the user's (a symlink is fine there), not refused as a project's."""
    home = tmp_path / "home"
    (home / ".eukhe").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("EUKHE_CODING_AGENT_DIR", raising=False)
    dotfiles = tmp_path / "eukhe.json"
    dotfiles.write_text(json.dumps({"kernel_transport": TRANSPORT}))
    (home / ".eukhe" / "settings.json").symlink_to(dotfiles)
    loaded = load_settings(home)
    assert loaded.kernel_transport is not None and loaded.diagnostics == ()
