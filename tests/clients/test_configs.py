"""The README's "Use it from your agent" gives exactly the configurations the client tests run the clients with
(tests/clients/configs.py): a drift in either fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.clients import claude_env
from tests.clients.configs import (
    CLAUDE_ALLOWED_TOOLS,
    CLAUDE_HEADLESS_ENV,
    README_HTTP,
    claude_mcp_add_line,
    claude_settings_text,
    codex_mcp_block,
    readme_stdio,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    """The README's "Use it from your agent" section."""
    text = README.read_text()
    start = text.index("## Use it from your agent")
    return text[start : text.index("\n## ", start + 1)]


@pytest.mark.parametrize(
    "snippet",
    [
        claude_mcp_add_line(readme_stdio()),
        claude_mcp_add_line(README_HTTP),
        f'--allowedTools\n"{CLAUDE_ALLOWED_TOOLS}"',
        claude_settings_text(),
        codex_mcp_block(readme_stdio()),
        codex_mcp_block(README_HTTP),
        *(f"`{name}={value}`" for name, value in CLAUDE_HEADLESS_ENV.items()),
    ],
)
def test_the_readme_gives_the_configuration_the_client_tests_use(snippet: str) -> None:
    assert snippet in section()


def test_claude_runs_with_the_readmes_headless_setting() -> None:
    assert CLAUDE_HEADLESS_ENV.items() <= claude_env({}, "http://127.0.0.1:1").items()
