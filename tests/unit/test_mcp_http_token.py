"""The bearer token of `eukhe mcp --http` (`eukhe.mcp.http.load_token`): EUKHE_MCP_TOKEN when set, else the token file
in the agent dir, made 0600 once and kept; a file others could read or replace is refused."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from eukhe.mcp.http import TOKEN_ENV, McpTokenError, load_token, read_or_make_token


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "agent"
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(directory))
    return directory


def test_the_token_file_is_made_0600_once_and_kept(agent: Path) -> None:
    token, where = load_token({})
    path = agent / "mcp-token"
    assert where == f"in {path} (mode 0600)"
    assert token not in where
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(agent.stat().st_mode) == 0o700
    assert len(token) >= 40, "32 random bytes"
    assert load_token({}) == (token, where), "kept across runs"
    assert path.read_text() == token + "\n"


def test_eukhe_mcp_token_wins_and_an_empty_one_is_refused(agent: Path) -> None:
    assert load_token({TOKEN_ENV: " chosen "}) == ("chosen", f"from {TOKEN_ENV}")
    assert not (agent / "mcp-token").exists(), "no file is made when the environment gives the token"
    with pytest.raises(McpTokenError, match="set but empty") as empty:
        load_token({TOKEN_ENV: "  "})
    assert empty.value.code == "mcp_token_error"


def test_a_token_file_others_could_read_or_that_is_a_symlink_or_empty_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mcp-token"
    path.write_text("secret\n")
    for mode in (0o644, 0o640, 0o602):
        path.chmod(mode)
        with pytest.raises(McpTokenError, match="not a private file of yours"):
            read_or_make_token(path)
    path.chmod(0o600)
    assert read_or_make_token(path) == "secret"

    path.write_text("\n")
    with pytest.raises(McpTokenError, match="empty"):
        read_or_make_token(path)

    path.unlink()
    real = tmp_path / "elsewhere"
    real.write_text("secret\n")
    real.chmod(0o600)
    path.symlink_to(real)
    with pytest.raises(McpTokenError, match="cannot read"):
        read_or_make_token(path)


def test_servers_starting_together_agree_on_one_token(tmp_path: Path) -> None:
    path = tmp_path / "mcp-token"
    tokens: list[str] = []
    start = threading.Barrier(8)

    def make() -> None:
        start.wait()
        tokens.append(read_or_make_token(path))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(tokens) == 8 and len(set(tokens)) == 1
    assert os.listdir(tmp_path) == ["mcp-token"], "no scratch file is left"
