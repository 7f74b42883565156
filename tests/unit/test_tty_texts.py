"""What a model reads of a tty job's answers: the screen (not the raw window), the notice past the limits, the
jobs_write hint of a detached tty job, a write's line saying why it answered, and a signal's line."""

from __future__ import annotations

from eukhe.calls.texts import answer_text, signalled_text, written_text
from eukhe.records.jobs import Detached, Settled
from eukhe.records.output import OutputWindow
from eukhe.records.tty import Signalled, Written

RAW = OutputWindow(
    text="\x1b[1m>>> \x1b[0m6*7\r\n42\r\n>>> ",
    bytes_kept=27,
    bytes_dropped=0,
    lines_kept=3,
    lines_dropped=0,
    notice=None,
    artifact=None,
)


def test_a_detached_tty_job_shows_its_screen_and_how_to_type_into_it() -> None:
    answer = Detached(job="job-1", kind="bash", command="python3", budget_ms=300, output=RAW, screen=">>>")
    text = answer_text(answer)
    assert text.startswith(">>>\n[still running after 300 ms as job job-1")
    assert text.endswith('jobs_write {"job": "job-1", "input": "..."} types into its terminal.')
    plain = answer_text(Detached(job="job-1", kind="bash", command="sleep 9", budget_ms=300, output=RAW))
    assert "jobs_write" not in plain


def test_a_settled_tty_job_shows_its_screen_then_its_end() -> None:
    cut = msgspec_replace(RAW, notice="[... 10 bytes dropped from the start]")
    answer = Settled(
        job="job-1", kind="bash", command="python3", exit_code=0, killed=False, output=cut, screen=">>> 6*7\n42"
    )
    assert answer_text(answer) == ">>> 6*7\n42\n[... 10 bytes dropped from the start]\n[exit 0]"


def test_a_write_shows_the_screen_since_the_last_answer_and_why_it_answered() -> None:
    answer = Written(
        job="job-1", reason="idle", input_bytes=4, waited_ms=3, view="scrollback", screen=">>> 6*7\n42\n>>>", output=RAW
    )
    assert written_text(answer) == (
        ">>> 6*7\n42\n>>>\n[job job-1 runs on (new lines; answered as it waits for input): jobs_write types more]"
    )
    quiet = Written(job="job-1", reason="budget", input_bytes=0, waited_ms=9, view="screen", screen="", output=RAW)
    assert written_text(quiet).startswith("(no new output)\n[job job-1 runs on (its screen; answered as the budget")


def test_a_signal_says_what_went_where() -> None:
    assert signalled_text(Signalled(job="job-1", signal="INT", groups=[5])) == "[SIGINT sent to job job-1]"


def msgspec_replace(window: OutputWindow, **changes: object) -> OutputWindow:
    return OutputWindow(**{**window.to_json(), **changes})  # type: ignore[arg-type]
