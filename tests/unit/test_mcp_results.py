"""What a model reads of each MCP tool answer: rendered output, the notice where the output was cut,
one line for a detached call, a cell's result or traceback, the jobs, progress messages; the file tools' lines and
counts, refusals with their reason; children's rows, roster and reports, clipped when they would flood."""

from __future__ import annotations

import base64

import msgspec
import pytest

from eukhe.calls.texts import (
    ANSWER_CLIP,
    CLIP,
    CUT_AT_START,
    answer_json,
    answer_text,
    clip,
    edit_text,
    error_text,
    glob_text,
    grep_text,
    job_line,
    job_list_text,
    output_text,
    progress_message,
    read_text,
    report_text,
    reports_text,
    roster_text,
    spawn_text,
    write_text,
)
from eukhe.core.bound import Keep, Slice, notice
from eukhe.records.children import ChildError, ChildReport, ChildRow, Reports, Roster
from eukhe.records.daemon import CallLive
from eukhe.records.fs import EditAnswer, EditChange, GlobAnswer, GrepAnswer, ReadAnswer, WriteAnswer
from eukhe.records.jobs import CellError, Detached, JobList, JobRow, Settled
from eukhe.records.output import OutputWindow
from eukhe.records.workspace import HandbackConflict, HandbackFailure, HandbackReport


def window(text: str = "", **fields: object) -> OutputWindow:
    base: dict[str, object] = {
        "text": text,
        "bytes_kept": len(text.encode()),
        "bytes_dropped": 0,
        "lines_kept": text.count("\n"),
        "lines_dropped": 0,
        "notice": None,
        "artifact": None,
    }
    return OutputWindow(**{**base, **fields})  # type: ignore[arg-type]


def row(**fields: object) -> JobRow:
    base: dict[str, object] = {
        "id": "job-1",
        "kind": "bash",
        "command": "make",
        "status": "running",
        "started_ms": 0,
        "bytes_kept": 10,
        "bytes_dropped": 5,
        "lines_kept": 1,
        "lines_dropped": 2,
        "exit_code": None,
        "killed": False,
    }
    return JobRow(**{**base, **fields})  # type: ignore[arg-type]


COUNTS = Slice(bytes_kept=10, bytes_dropped=90, lines_kept=2, lines_dropped=18)


def test_the_notice_words_for_a_cut_start_are_the_cores() -> None:
    tail = notice(Keep.TAIL, COUNTS, "/a/full.log")
    head = notice(Keep.HEAD, COUNTS, "/a/full.log")
    assert tail is not None
    assert head is not None
    assert CUT_AT_START in tail
    assert CUT_AT_START not in head


@pytest.mark.parametrize(("keep", "first"), [(Keep.TAIL, True), (Keep.HEAD, False)])
def test_the_notice_stands_where_the_output_was_cut(keep: Keep, first: bool) -> None:
    said = notice(keep, COUNTS, "/a/full.log")
    text = output_text(window("kept 1\nkept 2\n", notice=said, artifact="/a/full.log"))
    lines = text.splitlines()
    assert lines == ([said, "kept 1", "kept 2"] if first else ["kept 1", "kept 2", said])


def test_the_output_is_rendered_from_its_exact_bytes() -> None:
    raw = b"\x1b[32mok\x1b[0m \xff\r\n10%\r100%\n"
    exact = window(
        raw.decode("utf-8", "replace"), text_base64=base64.b64encode(raw).decode(), bytes_kept=len(raw), lines_kept=2
    )
    assert output_text(exact) == "ok \ufffd\n100%\n"


def test_a_failed_artifact_is_said() -> None:
    text = output_text(window("x\n", artifact_error="disk full"))
    assert text == "x\n[the full output could not be saved: disk full]\n"


def test_a_detached_call_ends_with_one_line_naming_its_job_and_how_to_wait_or_cancel() -> None:
    answer = Detached(job="job-7", kind="bash", command="sleep 9", budget_ms=250, output=window("tick\n"))
    text = answer_text(answer)
    assert text.splitlines() == ["tick", job_line("job-7", 250)]
    assert "job-7" in job_line("job-7", 250)
    assert 'jobs_wait {"job": "job-7"}' in text
    assert 'jobs_cancel {"job": "job-7"}' in text


def test_a_settled_command_shows_its_exit_or_its_kill() -> None:
    ok = Settled(job="job-1", kind="bash", command="true", exit_code=0, killed=False, output=window())
    assert answer_text(ok) == "(no output)\n[exit 0]"
    killed = Settled(job="job-1", kind="bash", command="x", exit_code=None, killed=True, output=window("a\n"))
    assert answer_text(killed) == "a\n[killed (its process group was ended)]"
    died = msgspec.structs.replace(killed, reason="worker_died")
    assert answer_text(died) == "a\n[killed (it ended with its worker, which died)]"


def test_a_cell_shows_its_result_or_its_traceback() -> None:
    value = Settled(
        job=None, kind="cell", command="x", exit_code=0, killed=False, output=window("hi\n"), outcome="ok", result="42"
    )
    assert answer_text(value) == "hi\nOut: 42"
    error = CellError(ename="ZeroDivisionError", evalue="division by zero", traceback=["\x1b[31mTraceback\x1b[0m\n"])
    raised = Settled(
        job=None, kind="cell", command="1/0", exit_code=1, killed=False, output=window(), outcome="error", error=error
    )
    assert answer_text(raised) == "Traceback\n[cell raised ZeroDivisionError]"
    quiet = Settled(job=None, kind="cell", command="x = 1", exit_code=0, killed=False, output=window(), outcome="ok")
    assert answer_text(quiet) == "(no output)"


def test_the_jobs_list() -> None:
    assert job_list_text(JobList(jobs=[])) == "no jobs"
    ended = row(id="job-2", status="ended", exit_code=3, command="a\nb")
    old = row(id="job-0", status="ended", exit_code=None, killed=True, reason="host_restart", command="sleep 9")
    text = job_list_text(JobList(jobs=[old, row(), ended]))
    assert text.splitlines() == [
        "job-0  bash  killed (15 bytes, 3 lines, it ended with the machine, which restarted)  sleep 9",
        "job-1  bash  running (15 bytes, 3 lines so far)  make",
        "job-2  bash  exit 3 (15 bytes, 3 lines)  a\\nb",
    ]


def test_progress_says_the_bytes_and_lines_so_far() -> None:
    assert progress_message(1.25, None) == "running for 1.2 s"
    counts = row(bytes_kept=1, bytes_dropped=0, lines_kept=1, lines_dropped=0)
    message = progress_message(2.0, CallLive(elapsed_ms=2000, job=counts))
    assert message == "job job-1 running for 2.0 s: 1 byte, 1 line of output so far"
    message = progress_message(2.0, CallLive(elapsed_ms=2000, job=counts, tail="a\nstep 3 of 9"))
    assert message == "job job-1 running for 2.0 s: 1 byte, 1 line of output so far; last: step 3 of 9"


def test_progress_of_a_wait_names_the_jobs_own_age_not_the_waits() -> None:
    counts = row(bytes_kept=1, bytes_dropped=0, lines_kept=1, lines_dropped=0)
    message = progress_message(0.2, CallLive(elapsed_ms=200, job=counts, job_elapsed_ms=700))
    assert message == "job job-1 running for 0.7 s: 1 byte, 1 line of output so far"


# --- the file tools ---------------------------------------------------------------------------------------------------


def read_answer(text: str, *, offset: int = 1, lines: int, total: int, **output: object) -> ReadAnswer:
    return ReadAnswer(absolute="/w/a.txt", offset=offset, lines=lines, total_lines=total, output=window(text, **output))


def test_a_read_shows_its_lines_then_which_lines_of_how_many() -> None:
    assert read_text(read_answer("one\ntwo\n", lines=2, total=2)) == "one\ntwo\n[/w/a.txt: lines 1-2 of 2]"
    assert read_text(read_answer("two", offset=2, lines=1, total=2)) == "two\n[/w/a.txt: lines 2-2 of 2]"
    assert read_text(read_answer("\x1b[31mred\x1b[0m\n", lines=1, total=1)) == "red\n[/w/a.txt: lines 1-1 of 1]"
    assert (
        read_text(read_answer("", offset=9, lines=0, total=2))
        == "[/w/a.txt: no lines from line 9; the file has 2 lines]"
    )
    assert read_text(read_answer("", lines=0, total=0)) == "[/w/a.txt: no lines from line 1; the file has 0 lines]"


def test_a_cut_read_shows_the_notice_after_its_lines_and_where_to_read_on() -> None:
    said = notice(Keep.HEAD, Slice(bytes_kept=4, bytes_dropped=6, lines_kept=2, lines_dropped=3), "/a/fs-read.log")
    cut = read_answer("3\n4\n", offset=3, lines=5, total=9, notice=said, artifact="/a/fs-read.log", lines_dropped=3)
    assert read_text(cut).splitlines() == ["3", "4", said, "[/w/a.txt: lines 3-7 of 9; read on with offset 5]"]
    long_line = read_answer("xxxx", lines=1, total=1, notice=said, artifact="/a/fs-read.log")
    assert read_text(long_line).splitlines() == ["xxxx", said, "[/w/a.txt: lines 1-1 of 1]"], "only in the artifact"


def test_write_edit_grep_and_glob_say_what_they_did_or_found() -> None:
    assert write_text(WriteAnswer(absolute="/w/a", bytes_written=1, created=True)) == "created /w/a (1 byte)"
    assert write_text(WriteAnswer(absolute="/w/a", bytes_written=0, created=False)) == "replaced /w/a (0 bytes)"
    changes = (
        EditChange(action="updated", path="/w/a"),
        EditChange(action="moved", path="/w/b", destination="/w/c"),
        EditChange(action="deleted", path="/w/d"),
    )
    assert edit_text(EditAnswer(changes=changes)) == "updated /w/a\nmoved /w/b -> /w/c\ndeleted /w/d"
    one = GrepAnswer(absolute="/w", matches=1, files=1, output=window("a.py:2:x\n"))
    assert grep_text(one) == "a.py:2:x\n[1 match in 1 file under /w]"
    many = GrepAnswer(absolute="/w", matches=3, files=2, output=window("a:1:x\na:2:x\nb:1:x\n"))
    assert grep_text(many).endswith("\n[3 matches in 2 files under /w]")
    assert grep_text(GrepAnswer(absolute="/w", matches=0, files=0, output=window())) == "[no matches under /w]"
    assert (
        glob_text(GlobAnswer(absolute="/w", count=2, output=window("a.py\nb.py\n"))) == "a.py\nb.py\n[2 files under /w]"
    )
    assert glob_text(GlobAnswer(absolute="/w", count=0, output=window())) == "[no files match under /w]"


def test_a_refusal_names_its_code_and_its_reason() -> None:
    assert error_text("fs_error", "cannot read x: no such file", "not_found") == (
        "fs_error (not_found): cannot read x: no such file"
    )
    assert error_text("unknown_job", "no job job-1") == "unknown_job: no job job-1"


# --- children ---------------------------------------------------------------------------------------------------------


def child(**fields: object) -> ChildRow:
    base: dict[str, object] = {
        "name": "w",
        "session": "s1",
        "status": "running",
        "workspace": "isolated",
        "cwd": "/ws/w/copy",
        "timeout_ms": None,
        "handback": None,
    }
    return ChildRow(**{**base, **fields})  # type: ignore[arg-type]


def report(**fields: object) -> ChildReport:
    base: dict[str, object] = {
        "name": "w",
        "session": "s1",
        "status": "answered",
        "answer": None,
        "error": None,
        "handback": None,
    }
    return ChildReport(**{**base, **fields})  # type: ignore[arg-type]


HANDED = HandbackReport(
    parent_dir="/p",
    paths_taken=("a.txt", "gone.txt"),
    paths_removed=("gone.txt",),
    conflicts=(
        HandbackConflict(path="both.txt", reason="both_changed", child_version="/ws/w/conflicts/both.txt"),
        HandbackConflict(path="x", reason="parent_holds_directory", child_version=None),
    ),
    conflicts_dir="/ws/w/conflicts",
)


def test_a_spawn_shows_the_child_and_how_to_collect_it() -> None:
    assert spawn_text(child(timeout_ms=500)).splitlines() == [
        "w: running (session s1, isolated workspace /ws/w/copy, timeout 500 ms)",
        '[collect {"names": ["w"]} waits for its report; subagents lists the children]',
    ]


def test_the_roster_shows_each_child_and_its_hand_back() -> None:
    assert roster_text(Roster(children=[])) == "no children"
    failed = HandbackFailure(path="a.txt", reason="EACCES", copy="/ws/v/copy")
    roster = Roster(children=[child(status="answered", handback=HANDED), child(name="v", handback=failed)])
    assert roster_text(roster).splitlines() == [
        "w: answered (session s1, isolated workspace /ws/w/copy)",
        "  handed back: 2 paths taken, 2 conflicts",
        "    took a.txt",
        "    removed gone.txt",
        "    conflict both.txt (both_changed): the session's content stayed; the child's version: "
        "/ws/w/conflicts/both.txt",
        "    conflict x (parent_holds_directory): the session's content stayed; the child's version: a removal",
        "v: running (session s1, isolated workspace /ws/w/copy)",
        "  hand-back failed at a.txt: EACCES (the child's copy is kept at /ws/v/copy)",
    ]


def test_the_reports_show_answers_as_json_errors_with_their_traceback_and_who_still_runs() -> None:
    error = ChildError(
        reason="exception", message="ZeroDivisionError: division by zero", traceback=["\x1b[31mT\x1b[0m\n"]
    )
    reports = Reports(
        reports=[
            report(answer={"n": 1, "s": "é\n"}),
            report(name="f", status="failed", error=error),
            report(name="r", status="running"),
        ]
    )
    assert reports_text(reports).splitlines() == [
        "w: answered",
        '  answer: {"n": 1, "s": "é\\n"}',
        "f: failed",
        "  error (exception): ZeroDivisionError: division by zero",
        "T",
        "r: running",
        "[still running: r; collect again to wait on]",
    ]
    assert reports_text(Reports(reports=[])) == "no children"
    raw = reports_text(Reports(reports=[report(answer="\x9b31mred\x7f")]))
    assert raw.splitlines()[1] == '  answer: "red"', "the answer's JSON is rendered: no control character is left"


def test_a_huge_answer_shows_its_head_and_says_the_structured_result_holds_it() -> None:
    big = report(answer=["x" * 100] * 1000)
    whole = answer_json(big.answer)
    first, answer, said = reports_text(Reports(reports=[big])).splitlines()
    assert first == "w: answered"
    assert answer.startswith("  answer: ")
    head = answer.removeprefix("  answer: ")
    assert whole.startswith(head)
    assert len(head.encode()) == ANSWER_CLIP.max_bytes
    dropped = f"{len(whole.encode()) - ANSWER_CLIP.max_bytes} bytes (0 lines)"
    assert said == f"[answer cut: {dropped} dropped from the end; the call's record holds all of it]"


def test_many_reports_are_clipped_to_the_default_limits() -> None:
    many = Reports(reports=[report(name=f"c{i}", answer=i) for i in range(1500)])
    whole = "\n".join(report_text(r) for r in many.reports)
    text = reports_text(many)
    kept, said = text.rsplit("\n", 1)
    assert kept.split("\n") == whole.split("\n")[: CLIP.max_lines]
    assert said.startswith("[text cut: ")
    assert f"({3000 - CLIP.max_lines} lines) dropped from the end" in said
    running = Reports(reports=[*many.reports, report(name="late", status="running")])
    assert reports_text(running).splitlines()[-1] == "[still running: late; collect again to wait on]", "never cut"


@pytest.mark.parametrize("end", ["", "\n"])
@pytest.mark.parametrize("lines", [1, 2, 1999, 2000, 2001, 5000])
def test_clip_keeps_what_fits_and_counts_the_rest_exactly(lines: int, end: str) -> None:
    text = "\n".join(f"line {i}" for i in range(lines)) + end
    clipped = clip(text)
    if lines <= CLIP.max_lines:
        assert clipped == text
        return
    kept, said = clipped.rsplit("\n", 1)
    assert kept.split("\n") == text.split("\n")[: CLIP.max_lines]
    assert said.startswith(f"[text cut: {len(text.encode()) - len(kept.encode()) - 1} bytes ("), "exact bytes"
    dropped = lines - CLIP.max_lines
    assert f"({dropped} line{'s' if dropped > 1 else ''}) dropped" in said


def test_collect_progress_says_how_many_ended() -> None:
    live = CallLive(elapsed_ms=2000, children_awaited=3, children_ended=1, children_running=["w", "u"])
    assert progress_message(2.0, live) == "waiting for children for 2.0 s: 1 of 3 ended; running: w, u"
    live = CallLive(elapsed_ms=2000, children_awaited=1, children_ended=1)
    assert progress_message(2.0, live) == "waiting for children for 2.0 s: all 1 ended"
