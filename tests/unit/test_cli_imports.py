"""The CLI's client path stays light (its round-trip target: bench/cli_roundtrip.py): parsing a daemon-backed
command imports no asyncio, rich, typing, pathlib, socket, subprocess or daemon/session/job/kernel module.

Each case runs in a fresh interpreter (this one has imported everything already) and lists what parsing added to
sys.modules. tests/real/test_cli_client_imports.py checks a whole call against a running daemon the same way. The
client's str socket paths (no pathlib) are checked against the daemon side's Path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.daemon.client import default_socket_file, default_socket_path, posix_path_text

HEAVY_ROOTS = frozenset(
    {
        "asyncio",  # the daemon's event loop: the client uses blocking sockets
        "rich",  # only when a spinner is shown on a terminal
        "typing",  # annotations only: TYPE_CHECKING = False in the client modules
        "pathlib",  # the client's paths are str
        "socket",  # the client uses _socket (socket's enums and selectors cost start-up time)
        "shutil",  # argparse's help formatter imports it; eukhe.cli.common's does not
        "subprocess",  # only to start a daemon
        "importlib",  # commands load with __import__
        "contextlib",
        "dataclasses",
        "inspect",
    }
)
HEAVY_EUKHE = (
    "eukhe.core",
    "eukhe.session",
    "eukhe.jobs",
    "eukhe.kernel",
    "eukhe.harness",
    "eukhe.output",
    "eukhe.runner",
    "eukhe.paths",
    "eukhe.private_fs",
    "eukhe.daemon.protocol",
    "eukhe.daemon.supervisor",
    "eukhe.daemon.host",
    "eukhe.daemon.worker",
)

CLIENT_COMMANDS = [
    ["bash", "--session", "s1", "--json", "--", "true"],
    ["bash", "--session", "s1", "--budget-ms", "5", "--", "echo", "hi"],
    ["session", "create", "--cwd", "/tmp", "--json"],
    ["session", "list"],
    ["jobs", "list", "--session", "s1", "--json"],
    ["jobs", "wait", "--session", "s1", "job-1"],
    ["watch", "--session", "s1"],
    ["tree", "navigate", "--session", "s1", "none"],
    ["ipython", "--session", "s1", "-c", "1"],
    ["daemon", "status", "--json"],
    ["remote", "list", "--session", "s1", "--json"],
    ["remote", "call", "--session", "s1", "add", "--args", '{"a": 2, "b": 3}', "--budget-ms", "5"],
]

PARSE_ONLY = """
import json, sys
before = set(sys.modules)
from eukhe.cli.main import build_parser, chosen_command
argv = sys.argv[1:]
args = build_parser(chosen_command(argv)).parse_args(argv)
assert callable(args.handler)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def heavy(modules: list[str]) -> list[str]:
    """The modules of `modules` the client path must not import."""
    return sorted(
        name
        for name in modules
        if name.split(".")[0] in HEAVY_ROOTS or any(name == m or name.startswith(m + ".") for m in HEAVY_EUKHE)
    )


def test_heavy_flags_what_it_should() -> None:
    """The guard itself can fail: it flags a heavy root, its submodules and a daemon-side module."""
    assert heavy(["asyncio.events", "rich", "eukhe.daemon.protocol", "eukhe.core.bound"]) == [
        "asyncio.events",
        "eukhe.core.bound",
        "eukhe.daemon.protocol",
        "rich",
    ]
    assert heavy(["json", "argparse", "_socket", "eukhe.daemon.client", "eukhe.cli.bash", "typing_x"]) == []


@pytest.mark.parametrize("argv", CLIENT_COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_parsing_a_client_command_imports_nothing_heavy(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARSE_ONLY, *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    assert "eukhe.daemon.client" in imported
    assert heavy(imported) == [], f"`eukhe {' '.join(argv)}` imports {heavy(imported)} (CLI start-up time)"


@given(st.lists(st.sampled_from(["", "/", "//", ".", "..", "a", "b.c", "./", "../"]), max_size=8).map("".join))
def test_posix_path_text_writes_a_path_as_pathlib_does(text: str) -> None:
    """The client's str socket paths read as the Path the daemon side makes of the same text."""
    assert posix_path_text(text) == str(PurePosixPath(text))


@pytest.mark.parametrize("tmpdir", ["", "/tmp", "/tmp/", "/var//tmp/./x", "rel/dir", "//net/tmp"])
def test_the_default_socket_is_the_daemons_default_socket(tmpdir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", tmpdir)
    assert default_socket_file() == str(default_socket_path())
    assert default_socket_path() == PurePosixPath(tmpdir or "/tmp") / f"eukhe-{os.getuid()}" / "daemon.sock"
