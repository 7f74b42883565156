"""Settings with scopes: the user's `<agent dir>/settings.json`, then the project's
`<cwd>/.eukhe/settings.json`; strict (an unknown key names the file and the key); `kernel_transport` is the user's
alone (in a project file it is refused with a diagnostic naming the file, and the session starts Local); the
session records the transport it started with."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from eukhe.api import Session
from eukhe.errors import InputError
from eukhe.records.settings import Limits

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
