"""Fuzz the CLI's argv (docs/testing.md): random argument lists, mostly valid command lines with words dropped,
repeated, swapped or replaced, run in this process against a real daemon in a private world. A usage error exits 2
with a message; nothing ever ends in a traceback (every other exit is 0 or 1 with a typed error)."""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eukhe.cli.main import main
from tests.fuzz.budget import fuzz_for
from tests.real.conftest import DaemonEnv
from tests.signal_support import signal_state_kept

pytestmark = pytest.mark.real

COMMAND_LINES: list[list[str]] = [
    ["session", "create", "--cwd", "{cwd}"],
    ["session", "list"],
    ["session", "show", "{session}"],
    ["bash", "--session", "{session}", "--budget-ms", "100", "--", "echo", "hi"],
    ["ipython", "--session", "{session}", "-c", "1 + 1"],
    ["jobs", "list", "--session", "{session}"],
    ["jobs", "wait", "--session", "{session}", "job-0", "--timeout-ms", "0"],
    ["jobs", "cancel", "--session", "{session}", "job-0"],
    ["tree", "navigate", "--session", "{session}", "none"],
    ["fs", "read", "--session", "{session}", "a.txt", "--offset", "1", "--limit", "2"],
    ["fs", "write", "--session", "{session}", "b.txt", "text"],
    ["fs", "grep", "--session", "{session}", "x", "--glob", "*.txt"],
    ["fs", "glob", "--session", "{session}", "*.txt"],
    ["children", "list", "--session", "{session}"],
    ["children", "collect", "--session", "{session}"],
    ["schema"],
    ["schema", "bash"],
    ["daemon", "status"],
]
"""Command lines that may run against the daemon; not: run (runs a command), mcp and watch (serve or stream until
stopped), daemon start/stop/run, kernel install (downloads)."""
WORDS = [
    "--json", "--session", "--budget-ms", "--timeout-ms", "--cwd", "--force", "--offset", "--limit", "--glob",
    "--head", "--max-lines", "-c", "--", "-", "-h", "--help", "--daemon-socket", "none", "-1", "0", "1e9",
    "99999999999999999999", "", " ", "é", "x" * 300, "--budget-ms=-5", "--limit=abc", "jobs", "bash", "fs",
    "session", "tree", "schema", "spawn", "children", "nope", "--nope", "-x",
]  # fmt: skip
"""Words a mutation puts in."""


def mutate(rng: random.Random, words: list[str]) -> list[str]:
    words = list(words)
    for _ in range(rng.randint(1, 3)):
        how = rng.randrange(5)
        at = rng.randrange(len(words) + 1)
        if how == 0 and words:
            del words[min(at, len(words) - 1)]
        elif how == 1:
            words.insert(at, rng.choice(WORDS))
        elif how == 2 and words:
            words[min(at, len(words) - 1)] = rng.choice(WORDS)
        elif how == 3 and len(words) > 1:
            i, j = rng.sample(range(len(words)), 2)
            words[i], words[j] = words[j], words[i]
        else:
            words = [rng.choice(WORDS) for _ in range(rng.randint(0, 4))]
    return words


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), signal_state_kept():
        try:
            code = main(argv)
        except SystemExit as leaving:  # argparse's usage errors
            code = leaving.code if isinstance(leaving.code, int) else 2
    return code, out.getvalue(), err.getvalue()


EUKHE_TRACEBACK = re.compile(r'Traceback \(most recent call last\):\n(?!\s+File "<cell-)')
"""A traceback that is not a cell's: a cell's (its first frame `File "<cell-c1>"`) is the output of the code it ran."""


def stop_daemons_under(directory: Path) -> None:
    """Stop the daemons whose socket a fuzzed `--daemon-socket` put under `directory` (and their workers)."""
    for socket_file in directory.rglob("*"):
        if socket_file.is_socket():
            with contextlib.suppress(Exception):
                run_cli(["daemon", "stop", "--daemon-socket", str(socket_file)])


def test_random_argv_exits_2_with_a_message_and_never_a_traceback(
    world: DaemonEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    # A fuzzed `--daemon-socket X` starts a daemon at X, relative to the cwd: here, never in the checkout, and each
    # such daemon is stopped at the end.
    scratch = tmp_path / "cwd"
    scratch.mkdir()
    monkeypatch.chdir(scratch)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    (tmp_path / "a.txt").write_text("x\ny\n")
    fill = {"{session}": session, "{cwd}": str(tmp_path)}

    def case(rng: random.Random) -> None:
        line = [fill.get(word, word) for word in rng.choice(COMMAND_LINES)]
        argv = mutate(rng, line) if rng.random() < 0.9 else line
        if {"run", "mcp", "watch", "kernel"} & set(argv) or ("daemon" in argv and "status" not in argv):
            return  # those would run a command, serve stdin or stop the daemon (an option may come first)
        code, out, err = run_cli(argv)
        assert not EUKHE_TRACEBACK.search(err + out), (argv, err[-2000:])
        if "bash" not in argv:  # `eukhe bash` exits with its command's code
            assert code in (0, 1, 2), (argv, code, err[-500:])
        if code == 2:
            assert (err + out).strip(), (argv, "exit 2 without a message")

    daemon = world.daemon_pid()
    try:
        fuzz_for(case, at_least=30)
    finally:
        stop_daemons_under(scratch)
    assert world.daemon_pid() == daemon, "the daemon stayed up: no command line stopped or crashed it"


def test_eukhe_without_a_command_or_with_help_prints_usage_not_a_traceback() -> None:
    """Every command module is registered once (children's was registered twice: `eukhe`, `eukhe --help` and
    `eukhe nope` crashed with `conflicting subparser: spawn`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EUKHE_")}
    for argv, code in (([], 2), (["--help"], 0), (["nope"], 2)):
        done = subprocess.run(
            [sys.executable, "-m", "eukhe.cli.main", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert "Traceback" not in done.stderr, (argv, done.stderr)
        assert done.returncode == code, (argv, done.returncode, done.stderr)
        assert (done.stdout + done.stderr).startswith(("usage: eukhe", "eukhe: ")), (argv, done.stdout, done.stderr)
