"""What a tool call's settle warns the model of (`eukhe.calls.runner.warnings_of`), and the running-jobs section."""

from __future__ import annotations

from eukhe.calls.runner import tail_of, warnings_of
from eukhe.calls.texts import running_jobs_text
from eukhe.records.fs import ReadAnswer
from eukhe.records.jobs import Detached, JobList, Settled
from tests.unit.test_mcp_results import row, window


def settled(**output: object) -> Settled:
    return Settled(job="job-1", kind="bash", command="make", exit_code=0, killed=False, output=window("ok\n", **output))


def test_an_answer_that_fits_and_settled_warns_of_nothing() -> None:
    assert warnings_of(settled()) == []


def test_a_bounded_output_warns_with_its_exact_count_and_where_all_of_it_is() -> None:
    bounded = settled(bytes_dropped=12, artifact="/a/job-1.log")
    assert warnings_of(bounded) == ["output bounded: 12 bytes dropped; all of it is in /a/job-1.log"]
    read = ReadAnswer(absolute="/w/a.txt", offset=1, lines=1, total_lines=9, output=window("a\n", bytes_dropped=3))
    assert warnings_of(read) == ["output bounded: 3 bytes dropped"], "a file read names no artifact: the file is it"


def test_a_detached_run_warns_that_it_goes_on_as_a_job() -> None:
    detached = Detached(job="job-2", kind="bash", command="sleep 9", budget_ms=30, output=window(""))
    assert warnings_of(detached) == ["the run outlived its budget (30 ms): it goes on as job job-2"]


def test_the_tail_is_the_last_lines_rendered() -> None:
    text = b"".join(f"line {i}\n".encode() for i in range(20)) + b"\x1b[31mred\x1b[0m"
    assert tail_of(text).splitlines() == ["line 16", "line 17", "line 18", "line 19", "red"]


def test_the_running_jobs_section_names_each_running_job_or_says_none() -> None:
    assert running_jobs_text(JobList(jobs=[row(status="ended", exit_code=0)])) == "running-jobs: none"
    text = running_jobs_text(JobList(jobs=[row(), row(id="job-2", status="ended", exit_code=1)]))
    assert text.splitlines()[0].startswith("running-jobs: 1 job running")
    assert "job-1" in text and "job-2" not in text
