"""What a model reads of each MCP tool answer (issue 13, 3-4): rendered output, the notice where the output was cut,
one line for a detached call, a cell's result or traceback, the jobs, progress messages."""

from __future__ import annotations

import base64

import msgspec
import pytest

from eukhe.core.bound import Slice, notice
from eukhe.core.limits import Keep
from eukhe.mcp.results import (
    CUT_AT_START,
    answer_text,
    job_line,
    job_list_text,
    output_text,
    progress_message,
)
from eukhe.records.jobs import CellError, Detached, JobList, JobRow, Settled
from eukhe.records.output import OutputWindow


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
    assert progress_message(1.25, None, None) == "running for 1.2 s"
    message = progress_message(2.0, "job-1", row(bytes_kept=1, bytes_dropped=0, lines_kept=1, lines_dropped=0))
    assert message == "job job-1 running for 2.0 s: 1 byte, 1 line of output so far"
