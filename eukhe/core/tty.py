"""Interactive jobs' decisions (a bash job on a pseudo-terminal): which signals a job may be sent, the terminal's
size, when a write's answer is due, and whether a model reads the screen or the scrollback.

A write's answer (`jobs_write`) is due, in this order of the table `write_verdict` reads:

    the job ended                                                        -> ended (the answer is settled)
    the budget passed                                                    -> budget
    output came since the write, and the program is idle (it sleeps,     -> idle
      nothing is left unread on the terminal)
    the output has been quiet QUIET_MS (since its last byte, or since    -> quiet
      the write when none came)
    else                                                                 -> wait until the next of those can hold

"Idle" is what lets a REPL's round trip answer at once, without waiting out the quiet while: the shell reads it
from the process state of the terminal's foreground group leader, and asks again every IDLE_POLL_MS while output has
come and the program still runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SIGNALS: dict[str, int] = {
    "HUP": 1,
    "INT": 2,
    "QUIT": 3,
    "KILL": 9,
    "USR1": 10,
    "USR2": 12,
    "TERM": 15,
    "WINCH": 28,
}
"""The signals `jobs_signal` sends to a job's process group, by name, with their Linux numbers."""

DEFAULT_COLS = 120
DEFAULT_ROWS = 40
MIN_SIZE = 2
MAX_COLS = 1000
MAX_ROWS = 500

QUIET_MS = 100
"""A write answers once the job's output has been quiet this long (or the program is idle, or the budget passed)."""
IDLE_POLL_MS = 1
"""While output has come and the program still runs, whether it is idle is asked again this often."""

WriteReason = Literal["ended", "budget", "idle", "quiet"]
View = Literal["screen", "scrollback"]


def signal_named(name: str) -> str | None:
    """The signal `name` means (`INT`, `SIGINT`, `int`: `INT`), if it is one a job may be sent; else None."""
    word = name.strip().upper()
    word = word.removeprefix("SIG")
    return word if word in SIGNALS else None


def size_problem(cols: int, rows: int) -> str | None:
    """Why a terminal size is refused (None: it is taken): each side within [MIN_SIZE, MAX_COLS or MAX_ROWS]."""
    if not MIN_SIZE <= cols <= MAX_COLS:
        return f"cols must be within {MIN_SIZE}..{MAX_COLS}, not {cols}"
    if not MIN_SIZE <= rows <= MAX_ROWS:
        return f"rows must be within {MIN_SIZE}..{MAX_ROWS}, not {rows}"
    return None


@dataclass(frozen=True, slots=True)
class WriteFacts:
    """What the shell knows when it asks whether a write's answer is due (times on the job's clock, in ms)."""

    now_ms: int
    written_ms: int  # when the input was written (or, with no input, when the call came)
    last_output_ms: int | None  # the last output since the write; None: none came yet
    idle: bool  # the program sleeps and nothing is left unread on its terminal
    ended: bool
    deadline_ms: int  # the call's budget ends here


@dataclass(frozen=True, slots=True)
class Answer:
    """The write's answer is due now, for this reason."""

    reason: WriteReason


@dataclass(frozen=True, slots=True)
class Wait:
    """Not yet: ask again at `until_ms` (or at the next output, or the job's end, if sooner)."""

    until_ms: int


def write_verdict(facts: WriteFacts) -> Answer | Wait:
    """Whether a write's answer is due (the table in the module's docstring)."""
    if facts.ended:
        return Answer("ended")
    if facts.now_ms >= facts.deadline_ms:
        return Answer("budget")
    output = facts.last_output_ms is not None
    if output and facts.idle:
        return Answer("idle")
    quiet_from = facts.last_output_ms if facts.last_output_ms is not None else facts.written_ms
    quiet_at = quiet_from + QUIET_MS
    if facts.now_ms >= quiet_at:
        return Answer("quiet")
    until = min(quiet_at, facts.deadline_ms)
    if output:
        until = min(until, facts.now_ms + IDLE_POLL_MS)
    return Wait(until)


def view_for(alternate_screen: bool) -> View:
    """What a model reads of a tty job: a full-screen program (it switched to the alternate screen: less, top,
    vim) shows its current screen; a line program (a shell, a REPL, a prompt) its scrollback."""
    return "screen" if alternate_screen else "scrollback"
