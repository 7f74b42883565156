"""Agent-controlled text reaches a person's terminal inert: the CLI run as a person runs it, its stdout and stderr
real pseudo-terminals, against a real daemon.

A job prints OSC 52 (the clipboard), a title change, a screen wipe, a cursor move, a C1 CSI, a bidi override and a
bare carriage return; its command text holds raw ones too, and so does a file's name and content. On a terminal no
ESC but a colour's (SGR) reaches it, no C1, no bidi control, no carriage return but the terminal's own before a
newline, and the visible forms are there; through a pipe the same commands print the bytes as they are.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from tests.real.conftest import DaemonEnv, make_env

pytestmark = pytest.mark.real

DEADLINE_S = 60.0

OUTPUT = (
    "\x1b]52;c;aGk=\x07 \x1b]0;output-title\x07 \x1b[2J\x1b[5A \x9b2J \u202eevil\u202c \x1b[31mred\x1b[0m 10%\r99%\n"
)
"""What the hostile job prints (printf writes it from PRINTF): every kind of attack, and a colour that stays."""
PRINTF = (
    r"\033]52;c;aGk=\007 \033]0;output-title\007 \033[2J\033[5A \302\2332J \342\200\256evil\342\200\254 "
    r"\033[31mred\033[0m 10%%\r99%%\n"
)
RAW_IN_COMMAND = "\x1b]0;command-title\x07\x1b[2J\x9b1;1H\u202e"
"""Raw controls in the command text itself (after `:`, a no-op, so the output holds only OUTPUT)."""
COMMAND = f"printf '{PRINTF}'; : '{RAW_IN_COMMAND}'"
FILE_NAME = "evil\x1b]0;name-title\x07\u202e.txt"
FILE_TEXT = "inside \x1b]52;c;aGk=\x07 \x1b[2J \x85\n"

SGR = re.compile(r"\x1b\[[0-9;]*m")
NOT_SHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What a terminal must not be sent (once SGR sequences and the terminal's own CR before LF are taken out)."""


def assert_inert(shown: bytes) -> str:
    """No ESC but SGR's, no C1, no bidi control, no C0 but newline, tab and the terminal's CR before LF; the text."""
    text = shown.decode("utf-8").replace("\r\n", "\n")
    assert not NOT_SHOWN.search(SGR.sub("", text)), text
    return text


@dataclass
class Shown:
    """What a CLI run on pseudo-terminals wrote to each: the bytes the terminal was sent."""

    code: int
    out: bytes
    err: bytes


def on_terminal(world: DaemonEnv, *args: str) -> Shown:
    """Run `eukhe ARGS` with stdout and stderr each a pseudo-terminal of its own; read both until they close."""
    out_main, out_side = pty.openpty()
    err_main, err_side = pty.openpty()
    try:
        process = world.spawned.add(
            subprocess.Popen(
                [sys.executable, "-m", "eukhe.cli.main", *args],
                stdin=subprocess.DEVNULL,
                stdout=out_side,
                stderr=err_side,
                env=world.env,
            )
        )
        os.close(out_side)
        os.close(err_side)
        out_side = err_side = -1
        seen = {out_main: bytearray(), err_main: bytearray()}
        reading = set(seen)
        deadline = time.monotonic() + DEADLINE_S
        while reading:  # each terminal until its end: EIO once no process holds it
            readable, _, _ = select.select(list(reading), [], [], max(0.0, deadline - time.monotonic()))
            assert readable, f"`eukhe {' '.join(args)}` still writes after {DEADLINE_S} s"
            for fd in readable:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    chunk = b""
                if chunk:
                    seen[fd] += chunk
                else:
                    reading.discard(fd)
        return Shown(process.wait(timeout=DEADLINE_S), bytes(seen[out_main]), bytes(seen[err_main]))
    finally:
        for fd in (out_main, err_main, out_side, err_side):
            if fd >= 0:
                os.close(fd)


@dataclass(frozen=True)
class Hostile:
    """A world whose session (sandbox off) ran COMMAND as `job`, in `cwd`, which holds a file named FILE_NAME."""

    world: DaemonEnv
    session: str
    job: str
    cwd: Path


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    """One world for this module's cases (each case only reads it, but `bash` adds a job). Made through pipes,
    which also starts the daemon: no daemon holds a test's terminal."""
    root = Path(tempfile.mkdtemp(prefix="ek", dir="/tmp"))
    world = make_env(root)
    try:
        cwd = root / "project"
        cwd.mkdir()
        (cwd / FILE_NAME).write_text(FILE_TEXT)
        session = world.json("session", "create", "--cwd", str(cwd), "--sandbox", "off")["id"]
        ran = world.json("bash", "--session", session, "--", COMMAND)
        assert ran["status"] == "settled" and ran["output"]["text"] == OUTPUT, ran
        yield Hostile(world, session, ran["job"], cwd)
    finally:
        left = world.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not left, f"processes outlived the daemon stop: {left}"


OUTPUT_SHOWN = (
    "\\u001b]52;c;aGk=\\u0007 \\u001b]0;output-title\\u0007 \\u001b[2J\\u001b[5A \\u009b2J \\u202eevil\\u202c "
    "\x1b[31mred\x1b[0m 10%\\r99%\n"
)
"""OUTPUT on a terminal: every control shown, the colour kept."""
COMMAND_SHOWN = "\\u001b]0;command-title\\u0007\\u001b[2J\\u009b1;1H\\u202e"
NAME_SHOWN = "evil\\u001b]0;name-title\\u0007\\u202e.txt"
LISTED_NAME = '"evil\\x1b]0;name-title\\x07\u202e.txt"'
"""A listing writes a name holding a control character quoted, as git does (docs/fs.md): the bidi control is left."""
LISTED_SHOWN = '"evil\\x1b]0;name-title\\x07\\u202e.txt"'
TEXT_SHOWN = "inside \\u001b]52;c;aGk=\\u0007 \\u001b[2J \\u0085\n"


@dataclass(frozen=True)
class Case:
    """A command a person runs, the stream that carries the agent's text, that text as it is (a pipe gets it) and
    as a terminal is sent it."""

    args: Callable[[Hostile], list[str]]
    stream: Literal["out", "err"]
    raw: str
    shown: str


CASES = {
    "bash": Case(lambda h: ["bash", "--session", h.session, "--", COMMAND], "out", OUTPUT, OUTPUT_SHOWN),
    "jobs wait": Case(lambda h: ["jobs", "wait", "--session", h.session, h.job], "out", OUTPUT, OUTPUT_SHOWN),
    "jobs list": Case(lambda h: ["jobs", "list", "--session", h.session], "out", RAW_IN_COMMAND, COMMAND_SHOWN),
    "session show": Case(lambda h: ["session", "show", h.session], "out", RAW_IN_COMMAND, COMMAND_SHOWN),
    "fs glob": Case(
        lambda h: ["fs", "glob", "--session", h.session, "*.txt", str(h.cwd)], "out", LISTED_NAME, LISTED_SHOWN
    ),
    "fs read": Case(
        lambda h: ["fs", "read", "--session", h.session, str(h.cwd / FILE_NAME)], "out", FILE_TEXT, TEXT_SHOWN
    ),
    "an error quoting a path": Case(
        lambda h: ["fs", "read", "--session", h.session, str(h.cwd / ("gone" + FILE_NAME))],
        "err",
        "gone" + FILE_NAME,
        "gone" + NAME_SHOWN,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_agent_text_reaches_a_terminal_inert_and_visible(hostile: Hostile, case: Case) -> None:
    shown = on_terminal(hostile.world, *case.args(hostile))
    assert (shown.code == 0) == (case.stream == "out"), shown  # the error's case exits 1
    text = assert_inert(shown.out if case.stream == "out" else shown.err)
    assert case.shown in text, (text, shown)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_through_a_pipe_the_bytes_are_as_they_are(hostile: Hostile, case: Case) -> None:
    done = through_pipes(hostile.world, *case.args(hostile))
    assert (done.returncode == 0) == (case.stream == "out"), done
    written = done.stdout if case.stream == "out" else done.stderr
    assert case.raw.encode() in written, done
    if case.raw == OUTPUT:
        assert written == OUTPUT.encode()


def test_json_on_a_terminal_is_json_of_the_same_value_with_nothing_raw(hostile: Hostile) -> None:
    args = ["jobs", "list", "--session", hostile.session, "--json"]
    shown = on_terminal(hostile.world, *args)
    assert shown.code == 0, shown
    on_a_pipe = through_pipes(hostile.world, *args)
    assert json.loads(assert_inert(shown.out)) == json.loads(on_a_pipe.stdout)
    assert {row["command"] for row in json.loads(on_a_pipe.stdout)["jobs"]} == {COMMAND}
    assert "\x9b1;1H\u202e".encode() in on_a_pipe.stdout  # through the pipe as json.dumps leaves it: C1 and bidi raw


def through_pipes(world: DaemonEnv, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run `eukhe ARGS` with stdout and stderr pipes, read as bytes (text mode would turn a lone CR into LF)."""
    return subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=world.env,
        timeout=DEADLINE_S,
        check=False,
    )


def test_a_command_with_brackets_runs_under_the_spinner(hostile: Hostile) -> None:
    """On a terminal the wait shows a spinner labelled with the command: the label is text, not rich markup (a
    closing tag that opens nothing, `[/x]`, would raise)."""
    shown = on_terminal(hostile.world, "bash", "--session", hostile.session, "--", "echo '[/x] [bold]'")
    assert shown.code == 0, shown
    assert assert_inert(shown.out) == "[/x] [bold]\n"
