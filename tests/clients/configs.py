"""The configurations that put eukhe in Claude Code and in Codex, in one place: the README's "Use it from your agent"
shows them (with `PATH` for this repository, and the example port), `tests/clients/test_configs.py` checks that it
does, and the client tests run the clients with exactly them.

What a user cannot guess, and why each piece is there:
- Claude Code asks before every MCP tool call; `claude -p` has no one to ask and refuses. The permission entry
  `mcp__eukhe__*` (in `--allowedTools`, or in `permissions.allow` of a settings file) allows eukhe's tools.
- Codex sends its first turn before an MCP server that is still starting has listed its tools, unless the server is
  `required = true` (then it waits, and fails the run when the server cannot start); and `codex exec` refuses every
  MCP tool that is not read-only unless its approval mode is `approve`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

NAME = "eukhe"
"""The name each client knows eukhe's server by: its tools are `mcp__eukhe__bash`, ..."""

CLAUDE_ALLOWED_TOOLS = "mcp__eukhe__*"
"""Claude Code's permission entry for every eukhe tool."""

CLAUDE_HEADLESS_ENV = {"MCP_CONNECTION_NONBLOCKING": "0", "MCP_TIMEOUT": "60000"}
"""`claude -p` sends its first turn without waiting for an MCP server still starting (its tools "will appear
shortly"); with this it waits for eukhe to connect first."""


@dataclass(frozen=True, slots=True)
class Stdio:
    """eukhe as a command the client starts (stdio); `name`: the name the client knows the server by."""

    command: str
    args: tuple[str, ...]
    name: str = NAME


@dataclass(frozen=True, slots=True)
class Http:
    """eukhe as a running `eukhe mcp --http` server: its URL and the bearer token (Claude Code sends it as a header;
    Codex reads it from `EUKHE_MCP_TOKEN`)."""

    url: str
    token: str
    name: str = NAME


McpServer = Stdio | Http

TOKEN_ENV = "EUKHE_MCP_TOKEN"
"""The variable Codex reads the token from, as `eukhe mcp --http` does."""


def readme_stdio(project: str = "PATH") -> Stdio:
    """eukhe run from this repository by uv (`PATH` in the README)."""
    return Stdio("uv", ("run", "--project", project, "eukhe", "mcp"))


README_HTTP = Http("http://127.0.0.1:8765/mcp", "$(cat ~/.eukhe/mcp-token)")
"""The README's HTTP example: the port it starts `eukhe mcp --http` on, and the token as a shell reads it."""


def shell_word(word: str) -> str:
    """A word as a user types it in a shell (double quotes around one with spaces; `$(...)` stays live)."""
    return f'"{word}"' if " " in word else word


def claude_mcp_add(server: McpServer) -> list[str]:
    """The arguments of `claude mcp add` that add eukhe."""
    if isinstance(server, Stdio):
        return [server.name, "--", server.command, *server.args]
    return ["--transport", "http", server.name, server.url, "--header", f"Authorization: Bearer {server.token}"]


def claude_mcp_add_line(server: McpServer) -> str:
    return " ".join(["claude", "mcp", "add", *map(shell_word, claude_mcp_add(server))])


def claude_allowed_tools(name: str = NAME) -> str:
    """Claude Code's permission entry for every tool of the server `name`."""
    return f"mcp__{name}__*"


def claude_settings() -> dict[str, Any]:
    """A Claude Code settings file (`.claude/settings.json`, or `~/.claude/settings.json`) that allows eukhe's tools,
    for interactive use without a prompt per call."""
    return {"permissions": {"allow": [CLAUDE_ALLOWED_TOOLS]}}


def claude_settings_text() -> str:
    return json.dumps(claude_settings())


def toml_string(value: str) -> str:
    return json.dumps(value)


def codex_mcp_block(server: McpServer) -> str:
    """The `config.toml` table that adds eukhe to Codex (`~/.codex/config.toml`)."""
    lines = [f"[mcp_servers.{server.name}]"]
    if isinstance(server, Stdio):
        lines.append(f"command = {toml_string(server.command)}")
        lines.append("args = [" + ", ".join(map(toml_string, server.args)) + "]")
    else:
        lines.append(f"url = {toml_string(server.url)}")
        lines.append(f"bearer_token_env_var = {toml_string(TOKEN_ENV)}")
    lines += ["required = true", "startup_timeout_sec = 60", 'default_tools_approval_mode = "approve"']
    return "\n".join(lines) + "\n"
