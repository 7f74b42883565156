"""Job and call answers (S2 "Jobs" 2-6): one shape for every blocking call that waits on a job.

`bash`, `ipython`, `jobs.wait` and `jobs.cancel` answer `Settled` (the run ended within the call's budget: its end and
its output) or `Detached` (the budget passed: the job goes on; the output so far). A cell that settles within its
budget never became a job: its `job` is null. Rewinds answer `Rewound`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from eukhe.core.jobends import EndReason, StopReason
from eukhe.records.base import Record
from eukhe.records.displays import Display
from eukhe.records.output import OutputWindow

JobKind = Literal["bash", "cell"]
CellOutcomeName = Literal["ok", "error", "interrupted", "died", "fault", "killed"]


class CellError(Record):
    """A cell's exception: its type name, its message and the cell's traceback lines."""

    ename: str
    evalue: str
    traceback: list[str]


class SandboxRefusal(Record):
    """Why a confined run failed, when the sandbox's policy was the cause (`eukhe.core.refusals`): the rule
    (`outside_writable_roots`, `read_only`, `protected`, `pinned`, `deny_read`, `eukhe_dirs`, `private_tmp`,
    `network_off`), the path its error named (null for the network), and `hint`, the one line that names the rule,
    what to do instead and the user's way on."""

    rule: str
    path: str | None
    hint: str


class Settled(Record, tag="settled", tag_field="status"):
    """The run ended within the call's budget: exit code (null when killed), output, and for a cell its outcome.
    `reason` says why a killed job ended with its host (`worker_died`, `daemon_stopped`, `host_restart`,
    `session_closed`); null for any other end."""

    job: str | None
    kind: str
    command: str
    exit_code: int | None
    killed: bool
    output: OutputWindow
    outcome: CellOutcomeName | None = None
    result: str | None = None
    error: CellError | None = None
    reason: EndReason | None = None
    screen: str | None = None
    """A tty job's screen as a terminal shows it (a full-screen program's screen, else its scrollback); null for
    any other job. `output` keeps the raw bytes and their counts."""
    displays: list[Display] = msgspec.field(default_factory=list)
    """A cell's images, in the order it displayed them (eukhe.records.displays); `displays_notice` says which are
    not shown and why, `displays_dropped` how many were past the count an answer saves."""
    displays_notice: str | None = None
    displays_dropped: int = 0
    left_running: str | None = None
    """The job that took the processes the shell left running (`cmd &`, `nohup`, a daemon): they go on as it, with
    the rest of the output; null when none was left."""
    notices: list[str] = msgspec.field(default_factory=list)
    """What the session did or says beside the run, one sentence each: git state a confined command left that
    would have run code on the user's next git command, and how it was undone."""
    refusal: SandboxRefusal | None = None
    """The sandbox's refusal that made a failed confined run fail (a non-zero exit, a cell that raised); null when
    the policy was not the cause, or was not read (an unconfined session, a run that did not fail)."""


class Detached(Record, tag="detached", tag_field="status"):
    """The call's budget passed: the job goes on in the background; `output` is what it wrote so far."""

    job: str
    kind: str
    command: str
    budget_ms: int
    output: OutputWindow
    screen: str | None = None
    """A tty job's screen as a terminal shows it (see `Settled.screen`)."""
    notices: list[str] = msgspec.field(default_factory=list)
    """What the session did or says beside the run (see `Settled.notices`)."""


CallAnswer = Settled | Detached


class JobRow(Record):
    """One job as `jobs.list` shows it: its state, its output counts (equal to its window's) and its end. `reason`
    says why a killed job ended with its host (null for any other end); a job of an earlier life whose end the journal
    does not hold (an older build's cell job) is `ended` with `exit_code` null and `killed` false."""

    id: str
    kind: str
    command: str
    status: Literal["running", "ended"]
    started_ms: int
    bytes_kept: int
    bytes_dropped: int
    lines_kept: int
    lines_dropped: int
    exit_code: int | None
    killed: bool
    reason: EndReason | None = None
    tty: bool = False
    """Whether the job runs on a pseudo-terminal (`bash` with `tty`): jobs_write writes to it."""


class JobList(Record):
    """`jobs.list`: every job the session ever ran (those of earlier worker or daemon lives too), in start order."""

    jobs: list[JobRow]


class JobDocument(Record):
    """The value of a running job's `eukhe.job` node in the state tree: what it runs, when it started (the host's
    monotonic ms), the host's boot id at its start, and the clean stop its host recorded before killing it."""

    kind: str
    command: str
    started_ms: int
    boot_id: str | None = None
    stop_reason: StopReason | None = None
    process_group: int | None = None
    """A bash job's process group (its leader's pid); a reopen after its host died ends what is left of it."""
    process_start: int | None = None
    """When the group's leader started, in clock ticks since boot (with the boot id: that leader, not a later pid)."""
    process_mark: str | None = None
    """The mark (EUKHE_JOB_MARK) in the environment of the job's processes."""


class Rewound(Record):
    """What a rewind did: the session it leaves open (a fork: the new one, `parent` the old), the leaf, the jobs it
    stopped within the budget and those still stopping."""

    session: str
    parent: str | None
    leaf: str | None
    stopped_jobs: list[str]
    stopping_jobs: list[str]
