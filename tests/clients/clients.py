"""The real MCP clients, run headless against a scripted model server: Claude Code (`claude -p`) and Codex (`codex
exec`), each with a private home, configured with exactly the configuration the README gives (`configs`), and
ended with their whole process group.

Neither client reaches anything but 127.0.0.1 here: Claude Code's model calls go to `ANTHROPIC_BASE_URL` and
`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` turns off its update checks, telemetry and error reports; Codex's go to
the model provider its config names, with no login (the provider asks for no key).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.clients.configs import (
    CLAUDE_HEADLESS_ENV,
    NAME,
    McpServer,
    claude_allowed_tools,
    claude_mcp_add,
    claude_settings,
    codex_mcp_block,
)
from tests.npm_tools import need_npm_tool

CLIENT_DEADLINE_S = 240.0
"""How long one client run may take: only a hang reaches it (a run is a few seconds)."""

PROMPT = "Use the tools."


@dataclass(frozen=True, slots=True)
class Client:
    """A client to run: `claude`, or `codex` with the model name it asks for (a bundled one picks Codex's mode)."""

    name: str
    model: str = "test-model"

    @property
    def label(self) -> str:
        return self.name if self.name == "claude" else f"codex-{self.model}"


CLAUDE = Client("claude", "claude-opus-4-1")
CODEX = Client("codex", "test-model")
"""Codex with a model it does not know: its function-call mode, with its fallback metadata."""
CODEX_CODE_MODE = Client("codex", "gpt-6.2-sol")
"""Codex with its default bundled model, which it drives in code mode (one JavaScript `exec` tool)."""


@dataclass(frozen=True, slots=True)
class Finished:
    """A client run's end: exit code, stdout, stderr."""

    returncode: int
    stdout: str
    stderr: str


def run(argv: Sequence[str], env: Mapping[str, str], cwd: Path, deadline: float = CLIENT_DEADLINE_S) -> Finished:
    """Run a client in a process group of its own, wait for its end (at most `deadline`), then end whatever is left
    of its group (an MCP server it started, a helper), so no process outlives the run."""
    process = subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(f"{argv[0]} did not end within {deadline} s: {stderr[-4000:]}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return Finished(process.returncode, stdout, stderr)


def claude_env(env: Mapping[str, str], model_url: str) -> dict[str, str]:
    """Claude Code's environment: the model at `model_url`, no traffic to anything else."""
    return {
        **env,
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **CLAUDE_HEADLESS_ENV,
    }


def run_claude(server: McpServer, env: Mapping[str, str], cwd: Path, model_url: str, *, settings: bool) -> Finished:
    """Configure the server in Claude Code as the README says (`claude mcp add`, for this project, in the private
    home), then run `claude -p`, its tools allowed by the README's `--allowedTools`, or with `settings` by the
    README's permission entry in the user's settings file."""
    claude = need_npm_tool("claude")
    full = claude_env(env, model_url)
    run([*claude, "mcp", "remove", server.name], full, cwd)  # a run made again adds it afresh
    added = run([*claude, "mcp", "add", *claude_mcp_add(server)], full, cwd)
    assert added.returncode == 0, added
    if settings:
        assert server.name == NAME, "the settings file allows eukhe's tools"
        path = Path(env["HOME"]) / ".claude" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(claude_settings()))
        return run([*claude, "-p", PROMPT], full, cwd)
    return run([*claude, "-p", PROMPT, "--allowedTools", claude_allowed_tools(server.name)], full, cwd)


def codex_config(server: McpServer, model_url: str, model: str, extra: str = "") -> str:
    """Codex's config.toml: a model provider at the scripted server (Responses API, no key), then the README's block
    for eukhe (`extra`: more top-level keys)."""
    return (
        f'model = "{model}"\n'
        'model_provider = "scripted"\n'
        f"{extra}\n"
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{model_url}/v1"\n'
        'wire_api = "responses"\n'
        "\n" + codex_mcp_block(server)
    )


def run_codex(
    client: Client, server: McpServer, env: Mapping[str, str], cwd: Path, model_url: str, *, extra: str = ""
) -> Finished:
    """Run `codex exec` with a private CODEX_HOME whose config.toml is `codex_config`."""
    codex = need_npm_tool("codex")
    home = Path(env["HOME"]) / ".codex"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(codex_config(server, model_url, client.model, extra))
    argv = [*codex, "exec", "--skip-git-repo-check", PROMPT]
    return run(argv, {**env, "CODEX_HOME": str(home)}, cwd)


def run_client(
    client: Client,
    server: McpServer,
    env: Mapping[str, str],
    cwd: Path,
    model_url: str,
    *,
    claude_settings_file: bool = False,
    codex_extra: str = "",
) -> Finished:
    """Run `client` once against the scripted model at `model_url`, with eukhe (or another MCP server) as `server`."""
    if client.name == "claude":
        return run_claude(server, env, cwd, model_url, settings=claude_settings_file)
    return run_codex(client, server, env, cwd, model_url, extra=codex_extra)
