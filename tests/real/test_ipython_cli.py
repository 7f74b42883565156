"""`eukhe ipython` through a real daemon (S2 "Jobs" 4): the JSON keys, detach into a cell job, wait, cancel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real

OUTPUT_KEYS = {"text", "bytes_kept", "bytes_dropped", "lines_kept", "lines_dropped", "notice", "artifact"}
ANSWER_KEYS = {"status", "job", "kind", "command", "output"}


@pytest.fixture
def session(world: DaemonEnv) -> str:
    project = world.root / "project"
    project.mkdir()
    created = world.json("session", "create", "--cwd", str(project))
    return str(created["id"])


def test_ipython_answers_the_bash_keys_plus_result_and_error(world: DaemonEnv, session: str) -> None:
    settled = world.json("ipython", "--session", session, "-c", "import os\nprint(os.getcwd())\nx = 6 * 7\nx")
    assert set(settled) >= ANSWER_KEYS | {"outcome", "result", "error", "exit_code", "killed"}
    assert set(settled["output"]) >= OUTPUT_KEYS
    assert (settled["status"], settled["outcome"], settled["job"], settled["result"], settled["error"]) == (
        "settled",
        "ok",
        None,
        "42",
        None,
    )
    assert settled["output"]["text"] == f"{world.root / 'project'}\n"
    again = world.json("ipython", "--session", session, "-c", "x + 1")
    assert again["result"] == "43"  # one kernel per session: the namespace persists

    failed = world.json("ipython", "--session", session, "-c", "def f():\n    raise KeyError('k')\nf()")
    assert failed["outcome"] == "error"
    assert (failed["error"]["ename"], failed["error"]["evalue"]) == ("KeyError", "'k'")
    assert any("raise KeyError" in line for line in failed["error"]["traceback"])

    plain = world.cli("ipython", "--session", session, "-c", "print('out')\n1/0")
    assert plain.returncode == 1
    assert plain.stdout == "out\n"
    assert "ZeroDivisionError" in plain.stderr


def test_a_cell_past_its_budget_is_a_job_to_wait_for_and_cancel(world: DaemonEnv, session: str) -> None:
    world.json("ipython", "--session", session, "-c", "1")  # the kernel is up
    go = world.root / "project" / "go"  # in the cwd, which the sandbox shows: the cell runs until it exists
    detached = world.json(
        "ipython",
        "--session",
        session,
        "--budget-ms",
        "100",
        "-c",
        f"import os, time\nprint('begun')\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n'end'",
    )
    assert (detached["status"], detached["budget_ms"], detached["kind"]) == ("detached", 100, "cell")
    assert set(detached) >= ANSWER_KEYS
    assert "result" not in detached  # not yet: the job's wait answers it
    job = detached["job"]
    listed = {j["id"]: j for j in world.json("jobs", "list", "--session", session)["jobs"]}
    assert listed[job]["kind"] == "cell"
    assert listed[job]["status"] == "running"
    go.touch()
    waited = world.json("jobs", "wait", "--session", session, job, "--timeout-ms", "20000")
    assert waited["status"] == "settled"
    assert waited["exit_code"] == 0
    assert waited["output"]["text"] == "begun\n"
    assert (waited["outcome"], waited["result"]) == ("ok", "'end'")  # a cell job's wait carries its result

    spinning = world.json("ipython", "--session", session, "--budget-ms", "100", "-c", "while True:\n    pass")
    cancelled = world.json("jobs", "cancel", "--session", session, spinning["job"])
    assert cancelled["killed"] is True
    after = world.json("ipython", "--session", session, "-c", "'alive'")
    assert after["result"] == "'alive'"


def test_ipython_reads_a_file_or_standard_input(world: DaemonEnv, session: str, tmp_path: Path) -> None:
    cell = tmp_path / "cell.py"
    cell.write_text("y = 'from a file'\ny\n")
    assert world.json("ipython", "--session", session, str(cell))["result"] == "'from a file'"
    piped = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "ipython", "--session", session, "--json", "-"],
        input="y.upper()",
        env=world.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert '"result": "\'FROM A FILE\'"' in piped.stdout
    code, error = world.json_error("ipython", "--session", session)
    assert code == 2
    assert error["error"] == "usage_error"
