"""What a tool call shows the model (issue 13, 3): the text of each answer, pure functions of its record.

The output window's text goes through the one renderer (`eukhe.core.render`: escape sequences out, overwrites
collapsed, invalid UTF-8 as U+FFFD); the counts are not touched, they stay those of the raw bytes, and the
structured result (the record itself) carries them. The truncation notice stands where the output was cut: before
the text when the start was dropped (a tail window), after it when the end was. A detached call ends with one line
naming its job and how to wait for it or cancel it.
"""

from __future__ import annotations

import base64

from eukhe.core.jobends import EndReason
from eukhe.core.render import render
from eukhe.records.jobs import Detached, JobList, JobRow, Settled
from eukhe.records.output import OutputWindow

NO_OUTPUT = "(no output)"
CUT_AT_START = "dropped from the start"
"""Words of the truncation notice (`eukhe.core.bound.notice`) when a window kept the tail: the cut is at the start.
tests/unit/test_mcp_results.py ties this to the notice the core writes."""

CELL_ENDS = {
    "interrupted": "cell interrupted",
    "killed": "cell killed (its kernel was ended; the next cell starts a fresh one)",
    "died": "the kernel died (the next cell starts a fresh one)",
    "fault": "the kernel broke the protocol and was replaced (the next cell starts a fresh one)",
}
"""How a cell that did not end `ok` ended, in words (an `error` names its exception)."""


def raw_bytes(window: OutputWindow) -> bytes | str:
    """The window's exact content: its bytes when they are not UTF-8 (`text_base64`), else its text."""
    return base64.b64decode(window.text_base64) if window.text_base64 is not None else window.text


def output_text(window: OutputWindow) -> str:
    """The window as the model reads it: rendered text, the notice where it was cut, the artifact's failure."""
    text = render(raw_bytes(window))
    if text and not text.endswith("\n"):
        text += "\n"
    lines = [text] if text else []
    if window.notice is not None:
        notice = window.notice + "\n"
        lines.insert(0 if CUT_AT_START in window.notice else len(lines), notice)
    if window.artifact_error is not None:
        lines.append(f"[the full output could not be saved: {window.artifact_error}]\n")
    return "".join(lines)


def job_line(job: str, budget_ms: int) -> str:
    """The one line that says a call detached: its job and how to wait for it or cancel it."""
    return (
        f'[still running after {budget_ms} ms as job {job}: jobs_wait {{"job": "{job}"}} waits for its end, '
        f'jobs_cancel {{"job": "{job}"}} cancels it]'
    )


def answer_text(answer: Settled | Detached) -> str:
    """The text of a `bash`, `ipython`, `jobs_wait` or `jobs_cancel` answer."""
    body = output_text(answer.output)
    if isinstance(answer, Detached):
        return body + job_line(answer.job, answer.budget_ms)
    if answer.kind == "cell" and answer.outcome is not None:
        return _cell_text(answer, body)
    who = f"job {answer.job}: " if answer.job is not None and answer.kind != "bash" else ""
    if answer.reason is not None:
        end = f"killed ({ENDED_WITH_HOST[answer.reason]})"
    else:
        end = "killed (its process group was ended)" if answer.killed else f"exit {answer.exit_code}"
    return (body or NO_OUTPUT + "\n") + f"[{who}{end}]"


def _cell_text(answer: Settled, body: str) -> str:
    """A cell's output, then its result (the value of its last expression) or its error, then how it ended."""
    parts = [body] if body else []
    if answer.result is not None:
        parts.append(f"Out: {render(answer.result)}\n")
    if answer.error is not None:
        trace = render("".join(answer.error.traceback)) or f"{answer.error.ename}: {answer.error.evalue}"
        parts.append(trace if trace.endswith("\n") else trace + "\n")
    if answer.outcome == "error":
        parts.append(f"[cell raised {answer.error.ename if answer.error is not None else 'an error'}]")
    elif answer.outcome != "ok":
        parts.append(f"[{CELL_ENDS.get(answer.outcome or '', f'cell ended: {answer.outcome}')}]")
    text = "".join(parts)
    return (text or NO_OUTPUT + "\n").rstrip("\n")


ENDED_WITH_HOST: dict[EndReason, str] = {
    "worker_died": "it ended with its worker, which died",
    "daemon_stopped": "it ended with the daemon, which stopped",
    "host_restart": "it ended with the machine, which restarted",
    "session_closed": "it ended with its session, which was closed",
}
"""Why a job ended with its host, in words (its `reason`)."""


def count(number: int, word: str) -> str:
    """`1 line`, `2 lines`."""
    return f"{number} {word}" if number == 1 else f"{number} {word}s"


def written(row: JobRow) -> str:
    """Every byte and line a job wrote so far (kept plus dropped: exact)."""
    return f"{count(row.bytes_kept + row.bytes_dropped, 'byte')}, {count(row.lines_kept + row.lines_dropped, 'line')}"


def job_row_text(row: JobRow) -> str:
    """One job as `jobs_list` shows it."""
    if row.status == "running":
        state = f"running ({written(row)} so far)"
    else:
        why = f", {ENDED_WITH_HOST[row.reason]}" if row.reason is not None else ""
        state = ("killed" if row.killed else f"exit {row.exit_code}") + f" ({written(row)}{why})"
    command = render(row.command).replace("\n", "\\n")
    return f"{row.id}  {row.kind}  {state}  {command}"


def job_list_text(answer: JobList) -> str:
    """The text of a `jobs_list` answer: one line per job, running or ended, in start order."""
    if not answer.jobs:
        return "no jobs"
    return "\n".join(job_row_text(row) for row in answer.jobs)


def error_text(code: str, message: str) -> str:
    """A refused call (isError): its catalogue code and the message, which names the field at fault."""
    return f"{code}: {message}"


def progress_message(elapsed_s: float, job: str | None, row: JobRow | None) -> str:
    """What a progress notification says: the time so far and, once the job shows its counts, its bytes and lines
    (exact: kept plus dropped)."""
    who = f"job {job} " if job is not None else ""
    if row is None:
        return f"{who}running for {elapsed_s:.1f} s"
    return f"{who}running for {elapsed_s:.1f} s: {written(row)} of output so far"
