"""The CLI reads a daemon's answer as the op's record: an answer of the wrong shape is a `daemon_protocol` error that
names the field at fault, and a well-shaped one prints under --json as the daemon sent it.

A real Unix socket server on a short tmp path answers the one request a command sends (no daemon, no mocks).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eukhe.cli.main import main
from tests.signal_support import signal_state_kept

JOB_ROW = {
    "id": "job-1",
    "kind": "bash",
    "command": "echo hi",
    "status": "ended",
    "started_ms": 5,
    "bytes_kept": 3,
    "bytes_dropped": 0,
    "lines_kept": 1,
    "lines_dropped": 0,
    "exit_code": 0,
    "killed": False,
    "reason": None,
    "tty": False,
}
WINDOW = {
    "text": "a.py\n",
    "bytes_kept": 5,
    "bytes_dropped": 0,
    "lines_kept": 1,
    "lines_dropped": 0,
    "notice": None,
    "artifact": None,
    "artifact_error": None,
    "text_base64": None,
    "artifact_bytes_dropped": 0,
}
SETTLED = {
    "status": "settled",
    "job": "job-1",
    "kind": "bash",
    "command": "echo hi",
    "exit_code": 0,
    "killed": False,
    "output": WINDOW,
    "outcome": None,
    "result": None,
    "error": None,
    "reason": None,
    "screen": None,
    "displays": [],
    "displays_notice": None,
    "displays_dropped": 0,
    "left_running": None,
    "notices": [],
    "refusal": None,
}

MISTYPED = [
    (["jobs", "list", "--session", "s1"], {"jobs": [{**JOB_ROW, "started_ms": "soon"}]}, "jobs[0].started_ms"),
    (["jobs", "wait", "--session", "s1", "job-1"], {**SETTLED, "exit_code": "zero"}, "exit_code"),
    (["jobs", "cancel", "--session", "s1", "job-1"], {**SETTLED, "status": "finished"}, "status"),
    (["ipython", "--session", "s1", "-c", "1"], {**SETTLED, "killed": "no"}, "killed"),
    (["session", "list"], {"sessions": "none"}, "sessions"),
    (["session", "create", "--cwd", "/tmp"], {"id": "s1", "cwd": "/tmp"}, "pid"),
    (["gc"], {"dry_run": False}, "at"),
    (["children", "list", "--session", "s1"], {"children": [{"name": 3}]}, "children[0].name"),
    (["fs", "glob", "--session", "s1", "*.py"], {"output": WINDOW, "absolute": "/tmp", "count": "1"}, "count"),
    (["remote", "list", "--session", "s1"], {"functions": [{"name": None}]}, "functions[0].name"),
    (["tree", "navigate", "--session", "s1", "none"], {"session": "s1"}, "parent"),
]

WELL_TYPED = [
    (["jobs", "list", "--session", "s1"], {"jobs": [JOB_ROW]}),
    (["jobs", "wait", "--session", "s1", "job-1"], SETTLED),
    (["fs", "glob", "--session", "s1", "*.py"], {"output": WINDOW, "absolute": "/tmp", "count": 1}),
    (["remote", "call", "--session", "s1", "add"], {"result": 5}),
]


class OneAnswer:
    """A Unix socket server that answers one request with `result` (whatever it is) and records the request."""

    def __init__(self, path: str, result: Any) -> None:
        self.result = result
        self.request: dict[str, Any] | None = None
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.listener.accept()
        with connection, connection.makefile("rb") as lines:
            self.request = json.loads(lines.readline())
            reply = {"id": self.request["id"], "ok": True, "result": self.result}
            connection.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        self.thread.join(timeout=30)
        self.listener.close()


@pytest.fixture
def socket_file() -> Iterator[str]:
    """A socket path short enough for AF_UNIX (a pytest tmp_path can pass its 108 bytes)."""
    directory = tempfile.mkdtemp(prefix="eukhe-cli-")
    yield os.path.join(directory, "d.sock")
    for leftover in Path(directory).iterdir():
        leftover.unlink()
    os.rmdir(directory)


def answered(socket_file: str, argv: list[str], result: Any) -> tuple[int, OneAnswer]:
    server = OneAnswer(socket_file, result)
    try:
        with signal_state_kept():
            code = main([*argv, "--json", "--daemon-socket", socket_file])
    finally:
        server.close()
    return code, server


@pytest.mark.parametrize(("argv", "result", "field"), MISTYPED, ids=lambda value: str(value)[:40])
def test_a_mistyped_answer_is_a_protocol_error_naming_the_field(
    socket_file: str, argv: list[str], result: Any, field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, server = answered(socket_file, argv, result)
    assert server.request is not None
    error = json.loads(capsys.readouterr().out)
    assert code != 0
    assert error["error"] == "daemon_protocol", error
    assert f"`{field}`" in error["message"] or f"`$.{field}`" in error["message"], error["message"]


@pytest.mark.parametrize(("argv", "result"), WELL_TYPED, ids=lambda value: str(value)[:40])
def test_a_well_typed_answer_prints_as_the_daemon_sent_it(
    socket_file: str, argv: list[str], result: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = answered(socket_file, argv, result)
    assert code == 0
    assert capsys.readouterr().out == json.dumps(result, ensure_ascii=False) + "\n"
