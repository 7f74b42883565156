"""Children from the Python API and from cells: each child is a session with its own kernel
and jobs whose run is its code; its end (answered, failed, stalled, cancelled) stops it, then an isolated child is
handed back path by path; the roster and the reports carry the hand-back; a reopened parent ends what its host left.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path

import msgspec
import pytest

from eukhe.api import ChildExistsError, InputError, Session, Settled, UnknownChildError, UsageError
from eukhe.children import CHILD_DOC
from eukhe.records.children import ChildState
from eukhe.records.sandbox import UNCONFINED
from eukhe.records.workspace import HandbackFailure, HandbackReport
from eukhe.workspace import WorkspaceLayout, WorkspaceTooLargeError
from tests.real.kernel_support import process_gone, run, until
from tests.real.tools import need_tools

pytestmark = pytest.mark.real


def git_tree(path: Path, files: dict[str, str]) -> Path:
    need_tools("git")
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


async def cell(session: Session, code: str) -> Settled:
    answer = await session.ipython(code, budget_ms=30_000)
    assert isinstance(answer, Settled), answer
    assert answer.error is None, answer.error
    return answer


def test_a_childs_answer_is_its_last_value_or_what_it_passed_to_rlm_answer(tmp_path: Path) -> None:
    work = git_tree(tmp_path / "work", {"a.txt": "a\n"})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            row = await session.children.spawn("last", "x = 6\nx * 7")
            assert (row.name, row.status, row.workspace, row.cwd, row.handback) == (
                "last",
                "running",
                "shared",
                str(work),
                None,
            )
            assert row.session != session.id
            await session.children.spawn("given", "rlm.answer({'files': ['a.txt'], 'n': 1})\n'not this'")
            await session.children.spawn("nothing", "y = 1")
            await session.children.spawn("odd", "object()")
            reports = {r.name: r for r in await session.children.collect(timeout_ms=30_000)}
            assert reports["last"].status == "answered"
            assert reports["last"].answer == 42
            assert reports["given"].answer == {"files": ["a.txt"], "n": 1}
            assert reports["nothing"].status == "answered"
            assert reports["nothing"].answer is None
            assert str(reports["odd"].answer).startswith("<object object at")  # not JSON: its repr
            assert all(r.error is None and r.handback is None for r in reports.values())
            assert [r.status for r in session.children.list()] == ["answered"] * 4
        finally:
            await session.close()

    run(scenario())


def test_a_child_fails_stalls_or_is_cancelled_and_its_report_says_why(tmp_path: Path) -> None:
    work = git_tree(tmp_path / "work", {})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            await session.children.spawn("raises", "def f():\n    return 1 / 0\nf()")
            await session.children.spawn("slow", "import time\ntime.sleep(600)", timeout_ms=300)
            await session.children.spawn("deleted", "import os, time\nrlm.answer(os.getpid())\ntime.sleep(600)")
            raised, slow = await session.children.collect(["raises", "slow"], timeout_ms=30_000)
            assert raised.status == "failed"
            assert raised.error is not None
            assert raised.error.reason == "exception"
            assert raised.error.message == "ZeroDivisionError: division by zero"
            assert any("1 / 0" in line for line in raised.error.traceback)
            assert slow.status == "stalled"
            assert slow.error is not None
            assert slow.error.reason == "stalled"
            (running,) = await session.children.collect(["deleted"], timeout_ms=0)
            assert running.status == "running"
            report = await session.children.delete("deleted")
            assert report.status == "cancelled"
            assert report.error is not None
            assert report.error.reason == "cancelled"
            assert [r.name for r in session.children.list()] == ["raises", "slow"]
            with pytest.raises(UnknownChildError):
                await session.children.collect(["deleted"])
            # The name is free again.
            await session.children.spawn("deleted", "1")
        finally:
            await session.close()

    run(scenario())


def test_two_deletes_of_one_running_child_at_once_end_it_once_and_the_second_names_it_unknown(
    tmp_path: Path,
) -> None:
    work = git_tree(tmp_path / "work", {})
    started = work / "started"  # in the child's workspace: the one place a confined child may write

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            await session.children.spawn("c", f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(600)")
            await until(started.exists, what="the child's cell to start")
            first, second = await asyncio.gather(
                session.children.delete("c"), session.children.delete("c"), return_exceptions=True
            )
            assert not isinstance(first, BaseException), first
            assert first.status == "cancelled"
            assert isinstance(second, UnknownChildError), second
            assert session.children.list() == []
        finally:
            await session.close()

    run(scenario())


def test_a_collect_waiting_on_a_child_that_a_delete_takes_off_the_roster_reports_the_others(tmp_path: Path) -> None:
    """A collect of all children waits while a delete ends one and takes it off the roster: the collect answers the
    children still there, without the deleted one (its delete answered its last report)."""
    work = git_tree(tmp_path / "work", {})
    started = work / "started"

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            await session.children.spawn("kept", "1")
            (kept,) = await session.children.collect(["kept"], timeout_ms=30_000)
            assert kept.status == "answered"
            await session.children.spawn("c", f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(600)")
            await until(started.exists, what="the child's cell to start")
            collecting = asyncio.ensure_future(session.children.collect(timeout_ms=30_000))
            await asyncio.sleep(0)  # the collect is waiting on "c"
            deleted = await session.children.delete("c")
            assert deleted.status == "cancelled"
            reports = await collecting
            assert [r.name for r in reports] == ["kept"]
        finally:
            await session.close()

    run(scenario())


def test_bad_spawns_are_refused_with_the_field_named(tmp_path: Path) -> None:
    work = git_tree(tmp_path / "work", {})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            with pytest.raises(InputError) as bad_mode:
                await session.children.spawn("c", "1", workspace="private")
            assert bad_mode.value.field == "workspace"
            with pytest.raises(InputError) as bad_timeout:
                await session.children.spawn("c", "1", timeout_ms=-1)
            assert bad_timeout.value.field == "timeout_ms"
            for name in ("", "a/b", "..", ".hidden", "x" * 65):
                with pytest.raises(UsageError) as bad_name:
                    await session.children.spawn(name, "1")
                assert (bad_name.value.code, getattr(bad_name.value, "field", None)) == ("workspace_name_error", "name")
            await session.children.spawn("c", "1")
            with pytest.raises(ChildExistsError):
                await session.children.spawn("c", "2")
            with pytest.raises(UnknownChildError):
                await session.children.delete("nobody")
            # The same refusals reach a cell as typed host errors.
            refused = await cell(
                session,
                "try:\n    rlm.spawn('c', '1')\nexcept Exception as e:\n    out = (type(e).__name__, e.code)\nout",
            )
            assert refused.result == repr(("HostRequestError", "child_exists"))
            refused = await cell(
                session,
                "try:\n    rlm.spawn('d', '1', workspace='x')\nexcept Exception as e:\n    out = e.code\nout",
            )
            assert refused.result == repr("bad_args")
        finally:
            await session.close()

    run(scenario())


def test_two_isolated_children_editing_one_git_tree_hand_back_and_the_conflict_keeps_the_parents_content(
    tmp_path: Path,
) -> None:
    """Two isolated children from a cell: the non-conflicting changes land, the conflict keeps the parent's
    content and shows the child's version under conflicts/, and the reports list both."""
    work = git_tree(
        tmp_path / "work",
        {"a.txt": "a\n", "b.txt": "b\n", "shared.txt": "base\n", "gone.txt": "bye\n", ".gitignore": "build/\n"},
    )
    (work / "build").mkdir()
    (work / "build" / "big.o").write_text("object\n")

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            spawned = await cell(
                session,
                "one = '''\nimport os\nassert not os.path.exists('build')\nopen('a.txt', 'w').write('a by one\\\\n')\n"
                "open('shared.txt', 'w').write('one\\\\n')\nos.remove('gone.txt')\n'one done'\n'''\n"
                "two = '''\nopen('b.txt', 'w').write('b by two\\\\n')\nopen('new/made.txt', 'w') if False else None\n"
                "import os\nos.makedirs('new')\nopen('new/made.txt', 'w').write('made\\\\n')\n"
                "open('shared.txt', 'w').write('two\\\\n')\nrlm.answer('two done')\n'''\n"
                "rows = [rlm.spawn('one', one, workspace='isolated'), rlm.spawn('two', two, workspace='isolated')]\n"
                "reports = rlm.collect(timeout_ms=30000)\n"
                "import json\njson.dumps({'rows': rows, 'reports': reports})",
            )
            assert spawned.result is not None
            result = json.loads(eval(spawned.result))
            assert [r["workspace"] for r in result["rows"]] == ["isolated", "isolated"]
            one, two = result["reports"]
            assert (one["status"], one["answer"], two["status"], two["answer"]) == (
                "answered",
                "one done",
                "answered",
                "two done",
            )
            # Each non-conflicting change lands in the parent.
            assert (work / "a.txt").read_text() == "a by one\n"
            assert (work / "b.txt").read_text() == "b by two\n"
            assert (work / "new" / "made.txt").read_text() == "made\n"
            assert not (work / "gone.txt").exists()
            assert (work / "build" / "big.o").read_text() == "object\n"
            # The first hand-back took shared.txt; the second conflicts: the parent keeps one's content.
            first, second = sorted((one, two), key=lambda r: len(r["handback"]["conflicts"]))
            assert (work / "shared.txt").read_text() == ("one\n" if first is one else "two\n")
            assert "shared.txt" in first["handback"]["paths_taken"]
            (conflict,) = second["handback"]["conflicts"]
            assert conflict["path"] == "shared.txt"
            assert conflict["reason"] == "both_changed"
            assert Path(conflict["child_version"]).read_text() == ("two\n" if first is one else "one\n")
            assert Path(conflict["child_version"]).is_relative_to(second["handback"]["conflicts_dir"])
            assert sorted(one["handback"]["paths_taken"]) == sorted(
                {"a.txt", "gone.txt", "shared.txt"} - ({"shared.txt"} if second is one else set())
            )
            assert "gone.txt" in one["handback"]["paths_removed"]
            # The roster carries the same hand-backs; each workspace is done: its copy is a link to the parent.
            rows = {row.name: row for row in session.children.list()}
            for name in ("one", "two"):
                assert isinstance(rows[name].handback, HandbackReport)
                layout = WorkspaceLayout.at(tmp_path / "workspaces", session.id, name)
                assert layout.copy.is_symlink()
                assert layout.copy.resolve() == work.resolve()
                assert not layout.base.exists()
        finally:
            await session.close()

    run(scenario(), timeout=120)


def test_a_child_still_writing_at_its_end_stops_before_its_hand_back(tmp_path: Path) -> None:
    """A child's thread still writing (through the copy's absolute path) when its run answers writes nothing after
    the hand-back: the child's kernel is gone before the hand-back starts. The thread watches for the copy's path to
    become the link to the parent's directory (the hand-back's last step) and writes a marker through it at once;
    a child stopped after its hand-back would leave that marker in the parent."""
    work = git_tree(tmp_path / "work", {"counter.txt": "0\n"})
    code = (
        "import os, threading, itertools\n"
        "copy = os.getcwd()\n"
        "target = os.path.join(copy, 'counter.txt')\n"
        "started = threading.Event()\n"
        "def write():\n"
        "    for n in itertools.count(1):\n"
        "        if os.path.islink(copy):\n"
        "            with open(os.path.join(copy, 'after-hand-back.txt'), 'w') as f:\n"
        "                f.write(str(n))\n"
        "            return\n"
        "        with open(target + '.tmp', 'w') as f:\n"
        "            f.write(f'{n}\\n')\n"
        "        os.replace(target + '.tmp', target)\n"
        "        started.set()\n"
        "threading.Thread(target=write, daemon=True).start()\n"
        "started.wait()\n"
        "open('kernel.pid', 'w').write(str(os.getpid()))\n"
        "rlm.answer(os.getpid())\n"
    )

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions", sandbox=UNCONFINED)  # reads host pids
        layout = WorkspaceLayout.at(tmp_path / "workspaces", session.id, "writer")
        kernel_alive_at: list[str] = []

        kernel_pid: list[int] = []

        def at_each_rename(point: str) -> None:  # the hand-back's own thread, before each of its renames
            if not kernel_pid:  # the first point comes before any rename: the copy is still there
                kernel_pid.append(int((layout.copy / "kernel.pid").read_text()))
            if not process_gone(kernel_pid[0]):
                kernel_alive_at.append(point)

        session.roster.handback_hook = at_each_rename
        try:
            await session.children.spawn("writer", code, workspace="isolated")
            (report,) = await session.children.collect(timeout_ms=30_000)
            assert report.status == "answered", report
            assert kernel_pid == [report.answer]
            assert isinstance(report.handback, HandbackReport)
            assert "counter.txt" in report.handback.paths_taken
            assert int((work / "counter.txt").read_text()) >= 1
            assert kernel_alive_at == []
            assert layout.copy.resolve() == work.resolve()  # the copy's path now leads to the parent's directory
            assert not (work / "after-hand-back.txt").exists()
        finally:
            await session.close()

    run(scenario(), timeout=120)


def test_a_parent_reopened_after_its_host_stopped_ends_the_child_it_left_and_hands_it_back(tmp_path: Path) -> None:
    """The child's run is cut when the parent's host stops; its copy and base stay (its session's directory is
    the copy). The reopened parent ends it (failed, host_stopped), stops it and hands back what it had written."""
    work = git_tree(tmp_path / "work", {"a.txt": "a\n"})
    root = tmp_path / "sessions"

    async def first_host() -> tuple[str, str]:
        session = await Session.create(work, root=root)
        code = "open('a.txt', 'w').write('a by the child\\n')\nimport time\ntime.sleep(600)"
        row = await session.children.spawn("cut", code, workspace="isolated")
        copy = Path(row.cwd)
        await until(lambda: (copy / "a.txt").read_text() == "a by the child\n", 30, "the child's write")
        await session.close()
        return session.id, row.session

    async def second_host(parent_id: str, child_id: str) -> None:
        layout = WorkspaceLayout.at(tmp_path / "workspaces", parent_id, "cut")
        assert layout.base.is_dir()  # kept across the stop
        assert (layout.copy / "a.txt").read_text() == "a by the child\n"
        assert (work / "a.txt").read_text() == "a\n"
        session = await Session.open(parent_id, root=root)
        try:
            (report,) = await session.children.collect(timeout_ms=30_000)
            assert report.status == "failed"
            assert report.error is not None
            assert report.error.reason == "host_stopped"
            assert report.session == child_id
            assert isinstance(report.handback, HandbackReport)
            assert report.handback.paths_taken == ("a.txt",)
            assert (work / "a.txt").read_text() == "a by the child\n"
            state = msgspec.convert(session.view_state().of_type(CHILD_DOC)["cut"], ChildState)
            assert state.ended
        finally:
            await session.close()
        # The child's own session stays on disk, its directory now the parent's.
        child = await Session.open(child_id, root=root)
        try:
            assert child.cwd == layout.copy or Path(child.cwd).resolve() == work.resolve()
            woken = await cell(child, "open('a.txt').read()")
            assert woken.result == repr("a by the child\n")
        finally:
            await child.close()

    parent_id, child_id = run(first_host(), timeout=60)
    run(second_host(parent_id, child_id), timeout=60)


def test_a_spawn_over_the_file_limit_is_refused_naming_shared_and_leaves_nothing(tmp_path: Path) -> None:
    work = git_tree(tmp_path / "work", {f"f{n}.txt": "" for n in range(5)})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            session.roster.max_files = 3  # the 100,000 of a real spawn, scaled down
            with pytest.raises(WorkspaceTooLargeError) as refused:
                await session.children.spawn("big", "1", workspace="isolated")
            assert "shared" in str(refused.value)
            assert session.children.list() == []
            assert not (tmp_path / "workspaces" / session.id / "big").exists()
            await session.children.spawn("big", "1")  # the name was not taken
        finally:
            await session.close()

    run(scenario())


def test_a_failed_hand_back_is_reported_on_the_row_and_the_report_and_the_copy_stays(tmp_path: Path) -> None:
    work = git_tree(tmp_path / "work", {"a.txt": "a\n", "b.txt": "b\n"})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")

        def parent_edits_b_while_a_is_taken(point: str) -> None:
            if point == "take:a.txt":
                (work / "b.txt").write_text("b by the parent, during the hand-back\n")

        session.roster.handback_hook = parent_edits_b_while_a_is_taken
        try:
            code = "open('a.txt', 'w').write('a by the child\\n')\nopen('b.txt', 'w').write('b by the child\\n')"
            row = await session.children.spawn("late", code, workspace="isolated")
            (report,) = await session.children.collect(timeout_ms=30_000)
            assert report.status == "answered"
            assert isinstance(report.handback, HandbackFailure)
            assert report.handback.path == "b.txt"
            assert "changed" in report.handback.reason
            assert report.handback.copy == row.cwd
            (listed,) = session.children.list()
            assert listed.handback == report.handback
            assert (Path(row.cwd) / "b.txt").read_text() == "b by the child\n"  # the copy stays
            assert (work / "b.txt").read_text() == "b by the parent, during the hand-back\n"
        finally:
            await session.close()

    run(scenario())


@pytest.mark.parametrize("move", ["navigate", "fork"])
def test_a_rewind_or_a_fork_cancels_the_children_spawned_after_its_target_and_hands_them_back(
    tmp_path: Path, move: str
) -> None:
    """A rewind in place (`navigate_tree`) and a fork at an entry both orphan the children spawned after it: each
    ends cancelled and is handed back; a child spawned before the entry goes on (in the fork, after a fork)."""
    work = git_tree(tmp_path / "work", {"a.txt": "a\n"})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        try:
            await session.children.spawn("early", "import time\ntime.sleep(600)")
            target = session.append("user", "go on")
            code = "open('a.txt', 'w').write('a by late\\n')\nimport time\ntime.sleep(600)"
            late = await session.children.spawn("late", code, workspace="isolated")
            await until(lambda: (Path(late.cwd) / "a.txt").read_text() == "a by late\n", 30, "the late child's write")
            if move == "fork":
                original = session.id
                rewound = await session.fork(target.id)
                assert rewound.parent == original != rewound.session == session.id
            else:
                rewound = await session.navigate_tree(target.id)
            assert rewound.leaf == target.id
            (report,) = await session.children.collect(["late"], timeout_ms=30_000)
            assert report.status == "cancelled"
            assert report.error is not None
            assert "rewind" in report.error.message
            assert isinstance(report.handback, HandbackReport)
            assert (work / "a.txt").read_text() == "a by late\n"  # nothing is lost: its change came back
            (early,) = await session.children.collect(["early"], timeout_ms=0)
            assert early.status == "running"  # spawned before the target: untouched
            assert (await session.children.delete("early")).status == "cancelled"
        finally:
            await session.close()

    run(scenario(), timeout=120)


def test_a_fork_takes_its_parents_running_children_and_the_parent_reopened_does_not_end_them_again(
    tmp_path: Path,
) -> None:
    """After a fork the children still running belong to the fork (the live roster goes on there); the session
    forked from records them as ended (cancelled, reason `forked`), so its reopen neither resumes nor hands them back
    a second time (it used to, and reported the hand-back failed: the fork had retired the copy)."""
    work = git_tree(tmp_path / "work", {"a.txt": "a\n"})
    root = tmp_path / "sessions"

    async def scenario() -> None:
        session = await Session.create(work, root=root)
        original = session.id
        try:
            code = "open('a.txt', 'w').write('a by the child\\n')\nimport time\ntime.sleep(600)"
            row = await session.children.spawn("kept", code, workspace="isolated")
            await until(lambda: (Path(row.cwd) / "a.txt").read_text() == "a by the child\n", 30, "the child's write")
            target = session.append("user", "fork here")
            rewound = await session.fork(target.id)
            assert rewound.session == session.id != original
            (listed,) = session.children.list()
            assert listed.status == "running"  # the fork owns it
            report = await session.children.delete("kept")
            assert report.status == "cancelled"
            assert isinstance(report.handback, HandbackReport)
            assert (work / "a.txt").read_text() == "a by the child\n"
        finally:
            await session.close()
        left = await Session.open(original, root=root)
        try:
            (report,) = await left.children.collect(timeout_ms=0)
            assert report.status == "cancelled"
            assert report.error is not None and report.error.reason == "forked"
            assert session.id in report.error.message
            assert report.handback is None  # no second hand-back
            assert (work / "a.txt").read_text() == "a by the child\n"
        finally:
            await left.close()

    run(scenario(), timeout=120)


def test_a_child_deleted_while_its_end_is_under_way_is_deleted_once_that_end_is_done(tmp_path: Path) -> None:
    """A delete that comes while the child's end (its stop, its hand-back) is under way waits for that end; it
    used to cancel it midway, and then waited forever for an end that would never come."""
    work = git_tree(tmp_path / "work", {"a.txt": "a\n"})

    async def scenario() -> None:
        session = await Session.create(work, root=tmp_path / "sessions")
        reached, release = threading.Event(), threading.Event()

        def hold(point: str) -> None:  # the hand-back's own thread: the end is under way while this waits
            reached.set()
            release.wait(30)

        session.roster.handback_hook = hold
        try:
            await session.children.spawn("c", "open('a.txt', 'w').write('changed\\n')", workspace="isolated")
            await until(reached.is_set, timeout=60, what="the child's hand-back to start")
            deleting = asyncio.ensure_future(session.children.delete("c"))
            await asyncio.sleep(0.05)
            assert not deleting.done()  # it waits for the end under way
            release.set()
            report = await asyncio.wait_for(deleting, 30)
            assert report.status == "answered", report
            assert isinstance(report.handback, HandbackReport)
            assert (work / "a.txt").read_text() == "changed\n"
            assert session.children.list() == []
        finally:
            release.set()
            await session.close()

    run(scenario(), timeout=120)
