"""Children under the daemon, from the CLI: each child is a session in a worker of its own, stopped at
its end; `eukhe spawn` and `eukhe children list|collect|delete` answer their records; `eukhe session close` refuses
while jobs run unless forced; a child cut by a daemon stop keeps its copy and is ended and handed back when its
parent reopens."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eukhe.records.children import ChildReport, ChildRow, Reports, Roster
from eukhe.records.daemon import DaemonStatus, SessionClosed
from eukhe.records.workspace import HandbackReport
from tests.real.conftest import DaemonEnv
from tests.real.kernel_support import process_gone
from tests.real.tools import need_tools

pytestmark = pytest.mark.real


def typed(kind: Any, value: Any) -> Any:
    """A CLI --json answer, decoded strictly as its record (an unknown or missing key fails the test)."""
    return msgspec.convert(value, type=kind)


@pytest.fixture
def tree(world: DaemonEnv) -> Path:
    path = world.root / "tree"
    path.mkdir()
    need_tools("git")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for name, text in {"a.txt": "a\n", "b.txt": "b\n", "both.txt": "base\n", ".gitignore": "target/\n"}.items():
        (path / name).write_text(text)
    (path / "target").mkdir()
    (path / "target" / "huge.bin").write_text("never copied\n")
    return path


def until_file(path: Path, text: str) -> None:
    """Wait (bounded, on real events) until `path` holds `text`."""
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text() == text):
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.01)


def test_two_isolated_children_from_the_cli_edit_one_git_tree_and_collect_reports_both(
    world: DaemonEnv, tree: Path
) -> None:
    # Unconfined: the children wait on a file the test writes outside their copies, and report host pids.
    session = world.json("session", "create", "--cwd", str(tree), "--sandbox", "off")["id"]
    go = world.root / "go"  # both copies are made before either child ends: their changes meet at the hand-back
    first_code = world.root / "first.py"
    first_code.write_text(
        "import os, time\nassert not os.path.exists('target')\n"
        "open('a.txt', 'w').write('a by first\\n')\nopen('both.txt', 'w').write('first\\n')\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n"
        "os.getppid()\n"
    )
    first = typed(ChildRow, world.json("spawn", "--session", session, "--name", "first", "--isolated", str(first_code)))
    assert (first.name, first.workspace, first.status) == ("first", "isolated", "running")
    assert Path(first.cwd) == world.agent_dir / "workspaces" / session / "first" / "copy"
    second_code = (
        "import os, time\nopen('b.txt', 'w').write('b by second\\n')\nopen('both.txt', 'w').write('second\\n')\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\n"
        "rlm.answer('ok')"
    )
    world.json("spawn", "--session", session, "--name", "second", "--isolated", "-c", second_code)
    running = typed(DaemonStatus, world.json("daemon", "status"))
    assert len(running.workers) == 3  # the parent's and one per child
    go.write_text("")
    collected = typed(Reports, world.json("children", "collect", "--session", session, "--timeout-ms", "30000"))
    first_report, second_report = collected.reports
    assert (first_report.status, second_report.status, second_report.answer) == ("answered", "answered", "ok")
    child_worker = first_report.answer  # the child's kernel is a child of the child's own worker
    status = typed(DaemonStatus, world.json("daemon", "status"))
    assert isinstance(child_worker, int)
    assert child_worker in [w.pid for w in running.workers if w.session == first.session]
    assert process_gone(child_worker)  # stopped at its end: its worker ended, its session stays
    assert [w.session for w in status.workers] == [session]
    # Each non-conflicting change landed; the conflict kept the parent's content (taken from the first to end).
    assert (tree / "a.txt").read_text() == "a by first\n"
    assert (tree / "b.txt").read_text() == "b by second\n"
    reports = {r.name: r for r in collected.reports}
    for report in reports.values():
        assert isinstance(report.handback, HandbackReport)
    taker, loser = sorted(reports.values(), key=lambda r: len(r.handback.conflicts))  # type: ignore[union-attr]
    assert (tree / "both.txt").read_text() == f"{taker.name}\n"
    assert "both.txt" in taker.handback.paths_taken  # type: ignore[union-attr]
    (conflict,) = loser.handback.conflicts  # type: ignore[union-attr]
    assert (conflict.path, conflict.reason) == ("both.txt", "both_changed")
    conflicts_dir = world.agent_dir / "workspaces" / session / loser.name / "conflicts"
    assert conflict.child_version == str(conflicts_dir / "both.txt")
    assert Path(conflict.child_version).read_text() == f"{loser.name}\n"
    assert sorted(reports["first"].handback.paths_taken) == sorted(  # type: ignore[union-attr]
        ["a.txt", "both.txt"] if taker.name == "first" else ["a.txt"]
    )
    roster = typed(Roster, world.json("children", "list", "--session", session))
    assert [(row.name, row.status) for row in roster.children] == [("first", "answered"), ("second", "answered")]
    assert [row.handback for row in roster.children] == [first_report.handback, second_report.handback]
    text = world.cli("children", "collect", "--session", session)
    assert text.returncode == 0
    assert "conflict both.txt (both_changed)" in text.stdout


def test_a_running_child_is_deleted_and_a_session_close_refuses_while_jobs_run_unless_forced(
    world: DaemonEnv, tree: Path
) -> None:
    session = world.json("session", "create", "--cwd", str(tree))["id"]
    world.json("spawn", "--session", session, "--name", "sleeper", "-c", "import time\ntime.sleep(600)")
    (running,) = typed(Reports, world.json("children", "collect", "--session", session, "--timeout-ms", "0")).reports
    assert running.status == "running"
    deleted = typed(ChildReport, world.json("children", "delete", "--session", session, "sleeper"))
    assert deleted.status == "cancelled"
    assert deleted.error is not None
    assert deleted.error.reason == "cancelled"
    assert typed(Roster, world.json("children", "list", "--session", session)).children == []
    code, error = world.json_error("children", "delete", "--session", session, "sleeper")
    assert (code, error["error"]) == (1, "unknown_child")
    code, error = world.json_error("spawn", "--session", session, "--name", "bad/name", "-c", "1")
    assert (code, error["error"]) == (1, "workspace_name_error")
    code, error = world.json_error("spawn", "--session", session, "--name", "x")
    assert (code, error["error"]) == (2, "usage_error")
    # A session with a running job is not closed unless forced.
    sleeper = world.json("bash", "--session", session, "--budget-ms", "0", "--", "sleep 600")["job"]
    code, error = world.json_error("session", "close", session)
    assert (code, error["error"]) == (1, "session_has_jobs")
    assert len(error["details"]["jobs"]) == 1
    closed = typed(SessionClosed, world.json("session", "close", session, "--force"))
    assert closed == SessionClosed(session=session, was_open=True)
    status = typed(DaemonStatus, world.json("daemon", "status"))
    assert status.workers == []
    assert status.reports == []  # a close is not a worker's death
    assert typed(SessionClosed, world.json("session", "close", session)).was_open is False
    # The session reopens on its next request; the job the forced close killed is still listed, with its reason.
    (row,) = world.json("jobs", "list", "--session", session)["jobs"]
    assert (row["id"], row["status"], row["killed"], row["reason"]) == (sleeper, "ended", True, "session_closed")


def test_a_child_cut_by_a_daemon_stop_keeps_its_copy_and_is_ended_and_handed_back_when_its_parent_reopens(
    world: DaemonEnv, tree: Path
) -> None:
    session = world.json("session", "create", "--cwd", str(tree))["id"]
    code = "open('a.txt', 'w').write('a by the cut child\\n')\nimport time\ntime.sleep(600)"
    row = typed(ChildRow, world.json("spawn", "--session", session, "--name", "cut", "--isolated", "-c", code))
    copy = Path(row.cwd)
    until_file(copy / "a.txt", "a by the cut child\n")
    assert world.cli("daemon", "stop").returncode == 0
    assert (copy.parent / "base").is_dir()
    assert (copy / "a.txt").read_text() == "a by the cut child\n"
    assert (tree / "a.txt").read_text() == "a\n"
    (report,) = typed(Reports, world.json("children", "collect", "--session", session, "--timeout-ms", "30000")).reports
    assert report.status == "failed"
    assert report.error is not None
    assert report.error.reason == "host_stopped"
    assert isinstance(report.handback, HandbackReport)
    assert report.handback.paths_taken == ("a.txt",)
    assert (tree / "a.txt").read_text() == "a by the cut child\n"
    assert copy.is_symlink()
    assert os.path.realpath(copy) == os.path.realpath(tree)
