"""A long eukhe call runs as an MCP task through the real Claude Code (docs/mcp.md, "Tasks", "Clients"): Claude Code
run interactive in a pseudo-terminal (only an interactive session declares the Tasks extension
`io.modelcontextprotocol/tasks`; `claude -p` does not), against `eukhe mcp` over stdio from the README's config, with
the scripted model (tests/clients/model_server.py). The prompt is the session's first, given on its command line:
Claude Code sends it while eukhe still connects, and the model's tool search waits for eukhe's tools.

The model calls `bash` with a command that waits for a file the test has not made yet, on a 300 ms budget. eukhe
answers the call with a task; Claude Code moves it to the background, and the model reads that it started. Only then
does the test make the file: the command ends, Claude Code polls `tasks/get` until the task completed, and hands the
model a task notification whose result is eukhe's text (`done`, `[exit 0]`).

Every wait polls an event (the model server's log, the screen, the process's end) against a deadline; the session
ends with `/exit`, and its whole process group is killed at the end whatever happened (Claude Code's debug log is
read only to say why a wait failed).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.clients.clients import PROMPT, claude_env, run
from tests.clients.configs import NAME, Stdio, claude_allowed_tools, claude_mcp_add, readme_stdio
from tests.clients.model_server import Anthropic, Call, ModelServer, calls, model_server
from tests.clients.test_what_the_model_reads import REPO, uv
from tests.npm_tools import need_npm_tool
from tests.real.conftest import DaemonEnv

pytestmark = [pytest.mark.real, pytest.mark.clients]

DEADLINE_S = 120.0
"""How long any one awaited event may take: only a hang reaches it (the whole session is a few seconds)."""

POLL_S = 0.05

API_KEY = "sk-ant-test"
"""The key `claude_env` gives Claude Code: an interactive session asks once whether to use a key from the
environment, unless its last 20 characters are approved already."""

INTERACTIVE_ENV = {"TERM": "xterm-256color", "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1"}
"""A terminal Claude Code draws on; and no fetch of its plugin marketplace (an interactive session's, from GitHub)."""

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")

STARTED = re.compile(
    rf'MCP tool "{NAME}/bash" started server-side task (?P<task>\S+)\. '
    r"It was moved to the background as task (?P<local>\w+)"
)
"""What Claude Code tells the model of a call answered with a task: eukhe's task id, and its own for the task."""


def wait_until(what: str, done: Callable[[], bool], why: Callable[[], str]) -> None:
    """Poll `done` until it holds; fail with `why()` past the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {DEADLINE_S} s\n{why()}")
        time.sleep(POLL_S)


class Terminal:
    """A program run in a pseudo-terminal (120x40), in a session and process group of its own; its output drained
    as it comes (a program whose terminal is not read blocks on its writes)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        self.main, side = pty.openpty()
        fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        try:
            self.process = subprocess.Popen(
                list(argv), env=dict(env), cwd=cwd, stdin=side, stdout=side, stderr=side, start_new_session=True
            )
        except BaseException:
            os.close(self.main)
            raise
        finally:
            os.close(side)
        self._output = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._drain, name="pty-reader", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.main, 65536)
            except OSError:  # EIO: the terminal's last user closed it
                return
            if not data:
                return
            with self._lock:
                self._output += data

    def screen(self, since: int = 0) -> str:
        """What the program wrote from byte `since` on, without its escape sequences."""
        with self._lock:
            data = bytes(self._output[since:])
        return ANSI.sub("", data.decode(errors="replace"))

    def written(self) -> int:
        with self._lock:
            return len(self._output)

    def shows(self, text: str, since: int = 0) -> bool:
        """Whether the program wrote `text` from byte `since` on (spaces aside: it moves the cursor over them)."""
        return "".join(text.split()) in "".join(self.screen(since).split())

    def type(self, text: str) -> None:
        """Type `text`, wait until the program shows it, then press Enter (in one write, Enter would be part of a
        paste)."""
        since = self.written()
        os.write(self.main, text.encode())
        wait_until(f"the terminal shows {text!r}", lambda: self.shows(text, since), lambda: self.screen()[-3000:])
        os.write(self.main, b"\r")

    def close(self) -> None:
        """Kill whatever is left of the program's process group, reap it, close the terminal."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        os.close(self.main)
        self._reader.join(timeout=10)


def prepare_home(home: Path, cwd: Path) -> None:
    """What an interactive session would ask a user first, answered: the onboarding is done, the API key from the
    environment is approved, the working directory is trusted; and eukhe's tools are allowed in the user's settings
    (`TaskStop` too: the model's tool that cancels a task)."""
    path = home / ".claude.json"
    config: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    config["hasCompletedOnboarding"] = True
    config["customApiKeyResponses"] = {"approved": [API_KEY[-20:]], "rejected": []}
    config.setdefault("projects", {}).setdefault(str(cwd), {})["hasTrustDialogAccepted"] = True
    path.write_text(json.dumps(config))
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"permissions": {"allow": [claude_allowed_tools(), "TaskStop"]}}))


def notifications(model: ModelServer) -> list[tuple[float, str]]:
    """The task notifications the model read, each with the time its request came: the user texts of the
    conversation's requests that hold a `<task-notification>`."""
    found = []
    for seen in list(model.requests):
        if not isinstance(seen.body, dict) or Anthropic.conversation(seen.body, model.prefix) is None:
            continue
        for message in seen.body.get("messages") or []:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                text = block.get("text", "") if block.get("type") == "text" else ""
                if "<task-notification>" in text:
                    found.append((seen.at, text))
    return found


def test_a_long_call_runs_as_a_task_in_an_interactive_claude_code(world: DaemonEnv) -> None:
    claude = need_npm_tool("claude")
    cwd = world.root / "w"
    cwd.mkdir()
    home = Path(world.env["HOME"])
    world.cli("daemon", "start")
    world.env["UV_NO_SYNC"] = "1"  # as in test_what_the_model_reads: the suite's environment is synced already
    server = Stdio(uv(), readme_stdio(str(REPO)).args)
    go = cwd / "go"
    command = f"while [ ! -e {go} ]; do sleep 0.1; done; echo done"
    script = calls(Call("bash", {"command": command, "budget_ms": 300}), end="Waiting for it.")
    debug = world.root / "claude-debug.txt"
    with model_server(script) as model:
        env = {**claude_env(world.env, model.url), **INTERACTIVE_ENV}
        assert env["ANTHROPIC_API_KEY"] == API_KEY
        added = run([*claude, "mcp", "add", *claude_mcp_add(server)], env, cwd)
        assert added.returncode == 0, added
        prepare_home(home, cwd)
        terminal = Terminal([*claude, "--debug-file", str(debug), PROMPT], env, cwd)
        try:

            def why() -> str:
                log = debug.read_text() if debug.exists() else ""
                return f"screen: {terminal.screen()[-3000:]}\ndebug log: {log[-4000:]}\nfailures: {model.failures}"

            wait_until("the model read the bash call's answer", lambda: bool(model.read), why)
            started = model.read[0]
            assert started.call.tool == "bash", started
            assert not started.is_error, started.text
            found = STARTED.search(started.text)
            assert found is not None, f"no started task in what the model read: {started.text!r}"
            assert "[exit" not in started.text, started.text
            go.touch()  # only now can the command end

            wait_until("the model read the task's result", lambda: bool(notifications(model)), why)
            at, notification = notifications(model)[0]
            assert at > started.received_at
            assert f"<task-id>{found['local']}</task-id>" in notification, notification
            assert "<status>completed</status>" in notification, notification
            assert f"MCP task {found['task']} ({NAME}/bash) completed" in notification, notification
            assert "<result>\ndone\n[exit 0]\n</result>" in notification, notification
            assert len(model.read) == 1, [one.text for one in model.read]
            assert not model.failures, model.failures

            terminal.type("/exit")
            wait_until("Claude Code ended", lambda: terminal.process.poll() is not None, why)
            assert terminal.process.returncode == 0, why()
        finally:
            go.touch()  # the command ends whatever happened
            terminal.close()
