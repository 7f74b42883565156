"""Interactive jobs' records (a bash job on a pseudo-terminal): a write's answer and a signal's.

`jobs.write` answers `Written` while the job runs (the output since the previous answer, and the screen), or
`Settled` once it ended (its end, as `jobs.wait` answers it). `jobs.signal` answers `Signalled`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from eukhe.core.tty import DEFAULT_COLS, DEFAULT_ROWS, MAX_COLS, MAX_ROWS, MIN_SIZE, QUIET_MS, SIGNALS
from eukhe.records.base import Record
from eukhe.records.jobs import Settled
from eukhe.records.output import OutputWindow

Tty = Annotated[
    bool,
    msgspec.Meta(
        description="Run it on a pseudo-terminal (its own session and controlling terminal): for programs that "
        "prompt, REPLs and full-screen tools. Then jobs_write types into it and jobs_signal signals it."
    ),
]
Cols = Annotated[
    Annotated[int, msgspec.Meta(ge=MIN_SIZE, le=MAX_COLS)] | None,
    msgspec.Meta(description=f"With tty: the terminal's width (default {DEFAULT_COLS})."),
]
Rows = Annotated[
    Annotated[int, msgspec.Meta(ge=MIN_SIZE, le=MAX_ROWS)] | None,
    msgspec.Meta(description=f"With tty: the terminal's height (default {DEFAULT_ROWS})."),
]
WriteInput = Annotated[
    str,
    msgspec.Meta(
        description='The text to type, control characters included: "\\n" is Enter, "\\u0003" Ctrl-C, '
        '"\\u0004" Ctrl-D (end of file), "\\u001b" Escape; "" only reads the output since the previous answer.'
    ),
]
WriteBudgetMs = Annotated[
    Annotated[int, msgspec.Meta(ge=0)] | None,
    msgspec.Meta(
        description=f"Wait at most this many milliseconds for the output (never more than the session's budget); "
        f"the answer comes sooner once the program waits for input or its output was quiet {QUIET_MS} ms.",
    ),
]
SignalName = Annotated[str, msgspec.Meta(description="The signal's name: " + ", ".join(SIGNALS) + ".")]


class Written(Record, tag="written", tag_field="status"):
    """A write to a running tty job: the raw output since the previous answer about the job (`output`, bounded,
    exact counts) and what the terminal shows (`screen`: a full-screen program's screen, else the scrollback from
    the line the cursor was on at the previous answer). `reason` says why it answered now: `idle` (the program
    waits for input), `quiet` (no output for a short while) or `budget` (the budget passed)."""

    job: str
    reason: Literal["idle", "quiet", "budget"]
    input_bytes: int
    """How many bytes of the input the terminal took (all of them, unless its input queue stayed full)."""
    waited_ms: int
    view: Literal["screen", "scrollback"]
    screen: str
    output: OutputWindow


JobWriteAnswer = Written | Settled


class Signalled(Record):
    """A signal went to the job's process group (a tty job's: its terminal's session and foreground group)."""

    job: str
    signal: str
    groups: list[int]


class JobAttachArgs(Record):
    """`jobs.attach`: stream a tty job's terminal (its screen now, then every byte it writes) until it ends or the
    client sends anything."""

    session: str
    job: str


class JobInputArgs(Record):
    """`jobs.input`: type `input` into a tty job's terminal, waiting for no output (an attached person's keys)."""

    session: str
    job: str
    input: WriteInput


class TtyOutput(Record, tag="tty_output", tag_field="type"):
    """Bytes a tty job wrote to its terminal (base64: any bytes), as an attached terminal shows them."""

    data: str


class Attached(Record):
    """`jobs.attach`: the stream ended: the job ended (`ended`, with its exit code or killed), or the client left."""

    job: str
    ended: bool
    exit_code: int | None = None
    killed: bool = False


class InputTaken(Record):
    """`jobs.input`: how many bytes of the input the terminal took."""

    job: str
    input_bytes: int
