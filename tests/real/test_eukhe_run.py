"""`eukhe run` as a user runs it: a real child process, merged output, exit codes, errors, the artifact."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from eukhe.records.cli import RunAnswer

pytestmark = pytest.mark.real

README = Path(__file__).resolve().parents[2] / "README.md"


def eukhe(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "EUKHE_CODING_AGENT_DIR": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", *args], capture_output=True, env=env, timeout=timeout, check=False
    )


def run_json(*args: str, home: Path) -> dict[str, object]:
    """The `eukhe run --json` answer (decoded strictly as its record), its output's keys beside the others."""
    done = eukhe("run", "--json", *args, home=home)
    answer = msgspec.json.decode(done.stdout, type=RunAnswer)
    assert done.returncode == answer.exit_code
    payload: dict[str, object] = json.loads(done.stdout)
    output = payload.pop("output")
    assert isinstance(output, dict)
    return {**payload, **output}


KEYS = {"exit_code", "text", "bytes_kept", "bytes_dropped", "lines_kept", "lines_dropped", "notice", "artifact"}


def test_an_empty_output_is_kept_whole(tmp_path: Path) -> None:
    payload = run_json("--", "true", home=tmp_path)
    assert payload.keys() >= KEYS
    assert payload["text"] == "" and payload["bytes_kept"] == 0 and payload["lines_kept"] == 0
    assert payload["notice"] is None and payload["artifact"] is None


def test_stdout_and_stderr_are_merged_in_arrival_order_and_the_exit_code_passes_through(tmp_path: Path) -> None:
    script = "echo one; echo two >&2; echo three; exit 7"
    payload = run_json("--", "sh", "-c", script, home=tmp_path)
    assert payload["text"] == "one\ntwo\nthree\n"
    assert payload["exit_code"] == 7


def test_a_large_output_is_bounded_and_the_artifact_holds_every_byte(tmp_path: Path) -> None:
    script = "i=0; while [ $i -lt 20 ]; do head -c 1000000 /dev/zero | tr '\\0' 'x'; echo; i=$((i+1)); done; printf end"
    payload = run_json("--max-bytes", "100", "--", "sh", "-c", script, home=tmp_path)
    total = 20 * 1_000_001 + 3
    assert payload["bytes_kept"] == 3 and payload["text"] == "end"  # the last line fits; the others do not
    assert payload["bytes_kept"] + payload["bytes_dropped"] == total  # type: ignore[operator]
    artifact = Path(str(payload["artifact"]))
    assert artifact.stat().st_size == total
    assert stat.S_IMODE(artifact.stat().st_mode) == 0o600
    assert str(artifact) in str(payload["notice"])
    assert artifact.parent == tmp_path / "artifacts"


def test_a_head_keeps_the_first_lines_and_prints_the_notice_after_them(tmp_path: Path) -> None:
    done = eukhe("run", "--head", "--max-lines", "2", "--", "seq", "1", "5", home=tmp_path)
    lines = done.stdout.decode().splitlines()
    assert lines[:2] == ["1", "2"]
    assert lines[2].startswith("[output truncated: 6 bytes (3 lines) dropped from the end")
    assert done.returncode == 0
    assert done.stderr == b""  # the notice is the last line already


def test_a_tail_prints_the_notice_before_the_window_and_again_on_stderr_after_it(tmp_path: Path) -> None:
    """On a terminal the notice (counts, artifact path) is then also the last line, below a window of any size."""
    done = eukhe("run", "--max-lines", "2", "--", "seq", "1", "5", home=tmp_path)
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith("[output truncated: 6 bytes (3 lines) dropped from the start")
    assert str(tmp_path / "artifacts") in lines[0]
    assert lines[1:] == ["4", "5"]
    assert done.stderr.decode() == f"eukhe: {lines[0]}\n"


def test_after_a_window_that_ends_inside_a_line_the_notice_starts_a_line_of_its_own_on_a_terminal(
    tmp_path: Path,
) -> None:
    """stderr on a real terminal (a pty), stdout on a pipe: the window's bytes stay exact, and the notice on the
    terminal begins a line instead of running on after the window's last, unended one."""
    main, terminal = pty.openpty()
    try:
        env = {**os.environ, "EUKHE_CODING_AGENT_DIR": str(tmp_path)}
        done = subprocess.run(
            [sys.executable, "-m", "eukhe.cli.main", "run", "--max-lines", "2", "--", "printf", "a\\nb\\nc"],
            stdout=subprocess.PIPE,
            stderr=terminal,
            env=env,
            timeout=120,
            check=False,
        )
        os.close(terminal)
        terminal = -1
        shown = b""
        while True:  # the child has exited: read the terminal until its end (EIO once nothing is left)
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main)
        if terminal >= 0:
            os.close(terminal)
    notice, window = done.stdout.split(b"\n", 1)
    assert window == b"b\nc"
    assert shown == b"\r\neukhe: " + notice + b"\r\n"


def test_an_output_within_the_limits_has_no_notice_anywhere(tmp_path: Path) -> None:
    done = eukhe("run", "--max-lines", "5", "--", "seq", "1", "5", home=tmp_path)
    assert done.stdout == b"1\n2\n3\n4\n5\n"
    assert done.stderr == b""


def test_no_truncation_keeps_every_byte(tmp_path: Path) -> None:
    payload = run_json("--no-truncation", "--", "seq", "1", "5000", home=tmp_path)
    assert payload["bytes_dropped"] == 0 and payload["lines_kept"] == 5000 and payload["artifact"] is None


def test_invalid_utf8_is_data(tmp_path: Path) -> None:
    payload = run_json("--", "printf", "ok \\377\\n", home=tmp_path)
    assert payload["text"] == "ok \ufffd\n" and payload["bytes_kept"] == 5
    raw = eukhe("run", "--", "printf", "ok \\377\\n", home=tmp_path)
    assert raw.stdout == b"ok \xff\n"


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--"],
        ["--head", "--tail", "--", "true"],
        ["--max-bytes", "-1", "--", "true"],
        ["--max-lines", "many", "--", "true"],
        ["--no-truncation", "--max-bytes", "3", "--", "true"],
    ],
)
def test_bad_arguments_are_one_line_on_stderr_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    done = eukhe("run", *args, home=tmp_path)
    assert done.returncode == 2
    assert done.stdout == b""
    assert len(done.stderr.decode().strip().splitlines()) == 1


def test_a_command_that_cannot_start_exits_127(tmp_path: Path) -> None:
    done = eukhe("run", "--", str(tmp_path / "no-such-command"), home=tmp_path)
    assert done.returncode == 127
    assert b"cannot start" in done.stderr
    as_json = eukhe("run", "--json", "--", str(tmp_path / "no-such-command"), home=tmp_path)
    assert as_json.returncode == 127
    assert json.loads(as_json.stdout)["error"] == "command_not_started"


def test_a_command_killed_by_a_signal_exits_128_plus_the_signal(tmp_path: Path) -> None:
    payload = run_json("--", "sh", "-c", "echo bye; kill -TERM $$", home=tmp_path)
    assert payload["exit_code"] == 128 + 15 and payload["text"] == "bye\n"


def test_a_background_child_holding_the_pipe_does_not_hang_the_run(tmp_path: Path) -> None:
    started = time.monotonic()
    payload = run_json("--", "sh", "-c", "sleep 60 & echo $!", home=tmp_path)
    assert time.monotonic() - started < 30
    holder = int(str(payload["text"]))
    os.kill(holder, signal.SIGKILL)  # `eukhe run` leaves it alone by design; the test does not leave it behind
    assert payload["exit_code"] == 0 and payload["stopped_reading"] is True


def test_the_readmes_first_command_shows_its_notice_counts_and_artifact_in_one_screen(tmp_path: Path) -> None:
    """The set-up block's first line, run as written after its `uv run eukhe`: all it prints fits a 24-line
    terminal, and the first and the last line are the notice, with the counts and the artifact's path."""
    setup = re.search(r"## Set up\n\n```sh\n(.*?)\n", README.read_text())
    assert setup is not None
    first = setup.group(1)
    assert first.startswith("python3 -m pip install -q uv && python3 -m uv run eukhe run "), first
    args = shlex.split(first.split("python3 -m uv run eukhe ", 1)[1])
    env = {**os.environ, "EUKHE_CODING_AGENT_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    lines = done.stdout.decode().splitlines()
    assert len(lines) <= 24, lines
    notice = lines[0]
    assert notice.startswith("[output truncated: ") and " dropped from the start; kept the last " in notice
    (artifact,) = (tmp_path / "artifacts").iterdir()
    assert notice.endswith(f"full output: {artifact}]")
    assert lines[-1] == f"eukhe: {notice}"
