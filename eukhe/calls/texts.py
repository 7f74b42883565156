"""What a tool call shows the model: the text of each answer, pure functions of its record.

The output window's text goes through the one renderer (`eukhe.core.render`: escape sequences out, overwrites
collapsed, invalid UTF-8 as U+FFFD); the counts are not touched, they stay those of the raw bytes, and the
record itself (journaled; `structuredContent` with `eukhe mcp --structured`) carries them. The truncation notice
stands where the output was cut: before
the text when the start was dropped (a tail window), after it when the end was. A detached call ends with one line
naming its job and how to wait for it or cancel it; so does a run whose shell left processes running, naming the
job that took them.

The file tools' answers carry their own bounded window (the head of a file or a listing, the notice after it), shown
the same way, then one line that says what was read or found. Texts that are not an output window (a patch's
changes, children's reports and roster) are built here and `clip`ped to the default limits, the head kept, with a
line that says the call's record holds all of it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from msgspec import UnsetType

from eukhe.core.bound import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Keep, OutputLimits, measure, window
from eukhe.core.jobends import EndReason
from eukhe.core.render import render
from eukhe.output import read_facts
from eukhe.records.children import ChildReport, ChildRow, ChildUsage, Reports, Roster
from eukhe.records.daemon import CallLive
from eukhe.records.displays import Display
from eukhe.records.fs import EditAnswer, GlobAnswer, GrepAnswer, ReadAnswer, WriteAnswer
from eukhe.records.jobs import Detached, JobList, JobRow, Settled
from eukhe.records.output import OutputWindow
from eukhe.records.remote import RemoteCallAnswer
from eukhe.records.tty import Signalled, Written
from eukhe.records.workspace import HandbackOutcome, HandbackReport

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


def screen_text(screen: str, window: OutputWindow) -> str:
    """What a tty job's terminal shows, then (past the limits) the notice naming the file of its raw output."""
    text = screen + "\n" if screen else ""
    if window.notice is not None:
        text += window.notice + "\n"
    return text


def written_text(answer: Written | Settled) -> str:
    """The text of a `jobs_write` answer: what the terminal shows since the previous answer (a full-screen
    program: its screen), then one line saying the job runs on; an ended job's as `jobs_wait` gives it."""
    if isinstance(answer, Settled):
        return answer_text(answer)
    body = screen_text(answer.screen, answer.output) or "(no new output)\n"
    why = {"idle": "it waits for input", "quiet": "its output was quiet", "budget": "the budget passed"}[answer.reason]
    view = "its screen" if answer.view == "screen" else "new lines"
    return body + f"[job {answer.job} runs on ({view}; answered as {why}): jobs_write types more]"


def signalled_text(answer: Signalled) -> str:
    """The text of a `jobs_signal` answer."""
    return f"[SIG{answer.signal} sent to job {answer.job}]"


def job_line(job: str, budget_ms: int) -> str:
    """The one line that says a call detached: its job and how to wait for it or cancel it."""
    return (
        f'[still running after {budget_ms} ms as job {job}: jobs_wait {{"job": "{job}"}} waits for its end, '
        f'jobs_cancel {{"job": "{job}"}} cancels it]'
    )


def answer_text(answer: Settled | Detached) -> str:
    """The text of a `bash`, `ipython`, `jobs_wait` or `jobs_cancel` answer (a tty job's: what its screen shows),
    with the session's notices on lines of their own at its end, then the sandbox's refusal that made it fail."""
    text = _run_text(answer)
    refused = [f"[{answer.refusal.hint}]"] if isinstance(answer, Settled) and answer.refusal is not None else []
    return "\n".join([text, *(f"[{notice}]" for notice in answer.notices), *refused])


def _run_text(answer: Settled | Detached) -> str:
    body = output_text(answer.output) if answer.screen is None else screen_text(answer.screen, answer.output)
    if isinstance(answer, Detached):
        typing = f' jobs_write {{"job": "{answer.job}", "input": "..."}} types into its terminal.' * (
            answer.screen is not None
        )
        return body + job_line(answer.job, answer.budget_ms) + typing
    if answer.kind == "cell" and answer.outcome is not None:
        return _cell_text(answer, body)
    who = f"job {answer.job}: " if answer.job is not None and answer.kind != "bash" else ""
    if answer.reason is not None:
        end = f"killed ({ENDED_WITH_HOST[answer.reason]})"
    else:
        end = "killed (its process group was ended)" if answer.killed else f"exit {answer.exit_code}"
    return (body or NO_OUTPUT + "\n") + f"[{who}{end}]" + left_line(answer.left_running)


def left_line(job: str | None) -> str:
    """The line that says the processes a shell left running go on as a job, and how to wait for it or cancel it
    (nothing when none was left)."""
    if job is None:
        return ""
    return (
        f'\n[processes it left running go on as job {job}: jobs_wait {{"job": "{job}"}} waits for their end, '
        f'jobs_cancel {{"job": "{job}"}} ends them]'
    )


def _cell_text(answer: Settled, body: str) -> str:
    """A cell's output, then its result (the value of its last expression) or its error, then how it ended."""
    parts = [body] if body else []
    if answer.result is not None:
        parts.append(f"Out: {render(answer.result)}\n")
    if answer.error is not None:
        trace = render("".join(answer.error.traceback)) or f"{answer.error.ename}: {answer.error.evalue}"
        parts.append(trace if trace.endswith("\n") else trace + "\n")
    parts += [line + "\n" for line in display_lines(answer)]
    if answer.outcome == "error":
        parts.append(f"[cell raised {answer.error.ename if answer.error is not None else 'an error'}]")
    elif answer.outcome != "ok":
        parts.append(f"[{CELL_ENDS.get(answer.outcome or '', f'cell ended: {answer.outcome}')}]")
    text = "".join(parts)
    return (text or NO_OUTPUT + "\n").rstrip("\n")


def display_line(number: int, display: Display) -> str:
    """One image of a cell's answer: its type, pixel size and bytes, whether it is shown, and its file."""
    size = f" {display.width}x{display.height}," if display.width is not None and display.height is not None else ""
    what = f"image {number}: {display.mime_type}{size} {count(display.bytes, 'byte')}"
    why = {"too_large": "not shown (too large)", "over_count": "not shown (past the count)"}
    shown = "shown" if display.shown else why.get(display.withheld or "", "not shown")
    where = f"saved at {display.artifact}" if display.artifact is not None else f"not saved: {display.artifact_error}"
    return f"[{what}, {shown}; {where}]"


def display_lines(answer: Settled) -> list[str]:
    """The lines that name a cell's images, then the notice of those not shown."""
    lines = [display_line(number, display) for number, display in enumerate(answer.displays, 1)]
    if answer.displays_notice is not None:
        lines.append(answer.displays_notice)
    return lines


ENDED_WITH_HOST: dict[EndReason, str] = {
    "worker_died": "it ended with its worker, which died",
    "daemon_stopped": "it ended with the daemon, which stopped",
    "host_restart": "it ended with the machine, which restarted",
    "session_closed": "it ended with its session, which was closed",
    "forked": "it went on in a fork of this session, which records its end",
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


def running_jobs_text(answer: JobList) -> str:
    """The `running-jobs` section a model reads (spec S2 jobs 7): how many jobs run, and each one's id, command and
    output so far; one line saying none runs when none does."""
    running = [row for row in answer.jobs if row.status == "running"]
    if not running:
        return "running-jobs: none"
    lines = [f"running-jobs: {count(len(running), 'job')} running (jobs_wait waits for one, jobs_cancel ends it)"]
    lines += [f"- {job_row_text(row)}" for row in running]
    return "\n".join(lines)


def job_list_text(answer: JobList) -> str:
    """The text of a `jobs_list` answer: one line per job, running or ended, in start order."""
    if not answer.jobs:
        return "no jobs"
    return "\n".join(job_row_text(row) for row in answer.jobs)


def error_text(code: str, message: str, reason: str | None = None) -> str:
    """A refused call (isError): its catalogue code (with the refusal's reason, as a file tool's `fs_error` gives
    one) and the message, which names the field or the path at fault."""
    return f"{code} ({reason}): {message}" if reason else f"{code}: {message}"


def progress_message(elapsed_s: float, live: CallLive | None) -> str:
    """What a progress notification says: the time so far; for a call that runs or waits on a job, the job's own age,
    its bytes and lines once it shows them (exact: kept plus dropped) and the last line of its output; for a
    `collect`, how many of the awaited children have ended."""
    if live is not None and live.children_awaited is not None:
        ended = live.children_ended or 0
        if ended == live.children_awaited:
            return f"waiting for children for {elapsed_s:.1f} s: all {live.children_awaited} ended"
        said = f"waiting for children for {elapsed_s:.1f} s: {ended} of {live.children_awaited} ended"
        return f"{said}; running: {', '.join(live.children_running)}" if live.children_running else said
    row = None if live is None else live.job
    if row is None:
        return f"running for {elapsed_s:.1f} s"
    last = (live.tail or "").splitlines()[-1:] if live is not None else []
    age_s = elapsed_s if live is None or live.job_elapsed_ms is None else live.job_elapsed_ms / 1000
    said = f"job {row.id} running for {age_s:.1f} s: {written(row)} of output so far"
    return f"{said}; last: {last[0]}" if last and last[0].strip() else said


# --- texts that are not an output window ----------------------------------------------------------------------------

CLIP = OutputLimits(DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Keep.HEAD)
"""How much of a text that is not an output window a model is shown: the default limits, from the head."""
ANSWER_CLIP = OutputLimits(DEFAULT_MAX_BYTES // 2, DEFAULT_MAX_LINES // 2, Keep.HEAD)
"""How much of one child's answer (JSON, one line) a report shows: half the text's limits, so that a report with a
huge answer still shows the head of it (a window keeps whole lines, and cuts a line only when none fits)."""


def clip(text: str, limits: OutputLimits = CLIP, what: str = "text") -> str:
    """`text` if it fits `limits`; else its head (whole lines, or the first line cut at a character boundary) and
    one line that says what was dropped (the call's record holds all of it: `eukhe session calls`). Counts are of
    UTF-8 bytes."""
    raw = text.encode("utf-8", "surrogatepass")
    facts = read_facts(raw, limits)
    kept = window(limits, facts)
    if kept.size == len(raw):
        return text
    counts = measure(kept, len(raw), len(facts.line_lengths))
    head = raw[kept.start : kept.end].decode("utf-8", "replace")
    if head and not head.endswith("\n"):
        head += "\n"
    dropped = f"{count(counts.bytes_dropped, 'byte')} ({count(counts.lines_dropped, 'line')})"
    return head + f"[{what} cut: {dropped} dropped from the end; the call's record holds all of it]"


# --- the file tools --------------------------------------------------------------------------------------------------


def _read_on(answer: ReadAnswer) -> str:
    """Where a cut read goes on: the line after the last whole line shown (a line longer than the limit is only in
    the artifact, so then nothing)."""
    raw = raw_bytes(answer.output)
    whole = raw.count(b"\n") if isinstance(raw, bytes) else raw.count("\n")
    return f"; read on with offset {answer.offset + whole}" if whole else ""


def read_text(answer: ReadAnswer) -> str:
    """The lines read (rendered; the notice after them when the range did not fit), then which lines of how many."""
    if answer.lines == 0:
        return (
            f"[{answer.absolute}: no lines from line {answer.offset}; the file has {count(answer.total_lines, 'line')}]"
        )
    last = answer.offset + answer.lines - 1
    cut = _read_on(answer) if answer.output.notice is not None else ""
    return (
        output_text(answer.output) + f"[{answer.absolute}: lines {answer.offset}-{last} of {answer.total_lines}{cut}]"
    )


def write_text(answer: WriteAnswer) -> str:
    """The file written: created or replaced, and its size."""
    verb = "created" if answer.created else "replaced"
    return f"{verb} {answer.absolute} ({count(answer.bytes_written, 'byte')})"


def edit_text(answer: EditAnswer) -> str:
    """One line per section of the patch, in its order: what it did to which file."""
    lines = [
        f"{change.action} {change.path}" + (f" -> {change.destination}" if change.destination is not None else "")
        for change in answer.changes
    ]
    return clip(render("\n".join(lines)) if lines else "(the patch changed nothing)")


def grep_text(answer: GrepAnswer) -> str:
    """The matching lines as PATH:LINE:TEXT (the notice after them when they did not fit), then the counts."""
    if answer.matches == 0:
        return f"[no matches under {answer.absolute}]"
    matches = "1 match" if answer.matches == 1 else f"{answer.matches} matches"
    return output_text(answer.output) + f"[{matches} in {count(answer.files, 'file')} under {answer.absolute}]"


def glob_text(answer: GlobAnswer) -> str:
    """The matching files, one relative path a line (the notice after them when they did not fit), then the count."""
    if answer.count == 0:
        return f"[no files match under {answer.absolute}]"
    return output_text(answer.output) + f"[{count(answer.count, 'file')} under {answer.absolute}]"


# --- children --------------------------------------------------------------------------------------------------------


def collect_line(names: Sequence[str]) -> str:
    """How to wait for these children's reports."""
    return f"collect {json.dumps({'names': list(names)})} waits for its report; subagents lists the children"


def spawn_text(row: ChildRow) -> str:
    """The child started: its name, status, workspace and session, then how to collect it."""
    return f"{child_row_text(row)}\n[{collect_line([row.name])}]"


def handback_text(handback: HandbackOutcome | None) -> str:
    """An isolated child's hand-back: the paths taken and each conflict, or where it failed."""
    if handback is None:
        return ""
    if not isinstance(handback, HandbackReport):
        return f"  hand-back failed at {handback.path}: {handback.reason} (the child's copy is kept at {handback.copy})"
    lines = [
        f"  handed back: {count(len(handback.paths_taken), 'path')} taken, {count(len(handback.conflicts), 'conflict')}"
    ]
    removed = set(handback.paths_removed)
    lines += [f"    {'removed' if path in removed else 'took'} {path}" for path in handback.paths_taken]
    for conflict in handback.conflicts:
        where = conflict.child_version or "a removal"
        lines.append(
            f"    conflict {conflict.path} ({conflict.reason}): the session's content stayed; the child's version: "
            f"{where}"
        )
    return "\n".join(lines)


def child_row_text(row: ChildRow) -> str:
    """One child as the roster shows it."""
    timeout = f", timeout {row.timeout_ms} ms" if row.timeout_ms is not None else ""
    return f"{row.name}: {row.status} (session {row.session}, {row.workspace} workspace {row.cwd}{timeout})"


def roster_text(answer: Roster) -> str:
    """The text of a `subagents` answer: each child, in spawn order, with its hand-back once it ran."""
    if not answer.children:
        return "no children"
    lines: list[str] = []
    for row in answer.children:
        lines.append(child_row_text(row))
        lines += messages_lines(row.messages)
        handed = handback_text(row.handback)
        if handed:
            lines.append(handed)
    return clip(render("\n".join(lines)))


def answer_json(value: Any) -> str:
    """A child's answer as JSON (it is a JSON value; C0 controls come out escaped, the rest is rendered)."""
    return json.dumps(value, ensure_ascii=False)


def messages_lines(messages: list[str]) -> list[str]:
    """A prompt child's `message_parent` texts, one line each."""
    return [f"  message: {render(text)}" for text in messages]


def usage_line(usage: ChildUsage | None) -> list[str]:
    """A prompt child's usage in one line (none for a code child)."""
    if usage is None:
        return []
    tokens = f"{usage.total_tokens} tokens ({usage.prompt_tokens} prompt, {usage.completion_tokens} completion)"
    return [f"  usage: {tokens}, {count(usage.model_calls, 'model call')}, {count(usage.tool_calls, 'tool call')}"]


def report_text(report: ChildReport) -> str:
    """One child's report: its status, its messages, its answer or its error (and traceback), its usage, its
    hand-back."""
    lines = [f"{report.name}: {report.status}", *messages_lines(report.messages)]
    if report.status != "running" and report.error is None:
        lines.append(f"  answer: {clip(render(answer_json(report.answer)), ANSWER_CLIP, 'answer')}")
    if report.error is not None:
        lines.append(f"  error ({report.error.reason}): {render(report.error.message)}")
        trace = render("".join(report.error.traceback)).rstrip("\n")
        if trace:
            lines.append(trace)
    lines += usage_line(report.usage)
    handed = render(handback_text(report.handback))
    if handed:
        lines.append(handed)
    return "\n".join(lines)


def reports_text(answer: Reports) -> str:
    """The text of a `collect` answer: each child's report (a child still running says so, and how to wait on)."""
    if not answer.reports:
        return "no children"
    text = clip("\n".join(report_text(report) for report in answer.reports))
    running = [report.name for report in answer.reports if report.status == "running"]
    if running:
        text += f"\n[still running: {', '.join(running)}; collect again to wait on]"
    return text


def remote_text(answer: RemoteCallAnswer) -> str:
    """The text of a `remote_call` answer: the result as JSON, its bounded window, or the typed error."""
    if not isinstance(answer.error, UnsetType):
        failure = answer.error
        return error_text(f"remote {failure.kind}", render(failure.message), failure.reason)
    if not isinstance(answer.output, UnsetType):
        return output_text(answer.output)
    return clip(render(answer_json(answer.result)), ANSWER_CLIP, "result")
