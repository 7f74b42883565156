"""A job (spec S2 "Jobs" 1-3): one output bounded by the session's Truncation, one end, a kill through its owner.

The model's state and the end are the core's (`eukhe.core.job.feed`); the window and the artifact are
`BoundedOutput`'s, fed exactly the bytes the core accepts, so the window's kept + dropped equals the model's. With an
artifact dir, every byte of a job also reaches its spill file as it is read (the artifact past the limits; removed
at an end within them), so the output outlives a host that dies. What a
job reports (`row`, `answer`) counts from its window, in bytes and lines: the byte cap and the line limit both bind
there, so the counts a caller sees always equal the window they get. The owner (a user bash, a kernel cell) writes
output, asks nothing, and reports the end with `finish`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from eukhe.clock import Clock
from eukhe.core import job as core
from eukhe.core.bound import Truncation
from eukhe.core.jobends import EndReason, GroupMark, StopReason
from eukhe.jobs.terminal import Terminal
from eukhe.output import BoundedOutput, BoundedResult, job_artifact_prefix
from eukhe.records.displays import Display
from eukhe.records.jobs import CellError, CellOutcomeName, Detached, JobRow, Settled


@dataclass(frozen=True, slots=True)
class CellEnding:
    """What a cell job adds to its end: the cell's outcome, the repr of its trailing expression, its error, its
    images (eukhe.records.displays)."""

    outcome: CellOutcomeName
    result: str | None
    error: CellError | None
    displays: tuple[Display, ...] = ()
    displays_notice: str | None = None
    displays_dropped: int = 0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a job runs and how its output is bounded."""

    kind: str  # "bash", "cell", ...
    command: str  # the command, or a cell's first line (jobs.list, the prompt)
    truncation: Truncation  # the session's Truncation
    artifact_dir: Path | None = None  # where the output's spill file and artifact go; None: neither
    written: bytes = b""  # bytes the run wrote before it became a job (a detached cell): counted first
    group: GroupMark | None = None  # its process group (bash): a reopen after its host died ends what is left of it


class JobOwner(Protocol):
    """Who runs a job: kills it on request and reports its end later with `Job.finish`."""

    def kill(self, job: Job) -> None: ...


class Job:
    """One running piece of work: output through the core's counters and a BoundedOutput window; one end."""

    def __init__(
        self,
        job_id: str,
        spec: JobSpec,
        owner: JobOwner,
        clock: Clock,
        on_end: Callable[[Job, core.End], None] | None = None,
    ) -> None:
        self.id = job_id
        self.spec = spec
        self.clock = clock
        self.started_ms = clock.now_ms()
        self._owner = owner
        self._on_end = on_end
        self._state = core.JobState(cap=core.cap_of(spec.truncation))
        # Every byte reaches the spill file (`job-<id>-*` in the artifact dir) as it is read: what a job wrote before
        # its host died is what a reopen finds there (`durable_output`).
        self._output = BoundedOutput(
            spec.truncation, spec.artifact_dir, artifact_prefix=job_artifact_prefix(job_id), spill=True
        )
        self._final: BoundedResult | None = None
        self._kill_requested = False
        self._end_waiters: list[Callable[[], None]] = []
        self.cell: CellEnding | None = None  # set by a cell's owner before it reports the end
        self.stop_reason: StopReason | None = None  # set by its host when a clean stop (which kills it) begins
        self.terminal: Terminal | None = None  # a tty job's (set by its owner before its first output)
        self.left_as: str | None = None  # the job that took what its shell left running (set before its end)
        if spec.written:
            self.write(spec.written)

    # -- facts ------------------------------------------------------------------------------------------------------

    @property
    def state(self) -> core.JobState:
        """The model's state: cap, kept, dropped, end."""
        return self._state

    @property
    def end(self) -> core.End | None:
        return self._state.end

    @property
    def running(self) -> bool:
        return self._state.end is None

    @property
    def kept(self) -> int:
        return self._state.kept

    @property
    def dropped(self) -> int:
        return self._state.dropped

    @property
    def kill_requested(self) -> bool:
        return self._kill_requested

    @property
    def owner(self) -> JobOwner:
        """Who runs the job (a `BashRun` for user bash: its `pgid` names the process group)."""
        return self._owner

    # -- the owner's side --------------------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Output from the run: counted by the core, the accepted part written to the window; ignored after the end."""
        event = core.Output(len(data))
        taken = core.accepted(self._state, event)
        self._state = core.feed(self._state, event)
        if self.terminal is not None and self._state.end is None:
            self.terminal.feed(data)
        if taken:
            self._output.write(data if taken == len(data) else data[:taken])

    def finish(self, end: core.End) -> bool:
        """The owner reports the end. The first end wins (True); any later one is ignored (False)."""
        event: core.JobEvent = core.Exit(end.code) if isinstance(end, core.Exited) else core.Kill()
        reported = core.ends(self._state, event)
        if reported is None:
            return False
        self._state = core.feed(self._state, event)
        self._final = self._output.close()
        waiters, self._end_waiters = self._end_waiters, []
        for wake in waiters:
            wake()
        if self._on_end is not None:
            self._on_end(self, reported)
        return True

    # -- the caller's side ------------------------------------------------------------------------------------------

    def kill(self) -> None:
        """Ask the owner to kill the run (idempotent; nothing once ended). The end comes when the owner reports it."""
        if self._state.end is not None or self._kill_requested:
            return
        self._kill_requested = True
        self._owner.kill(self)

    def snapshot(self) -> BoundedResult:
        """The output window so far."""
        return self._final if self._final is not None else self._output.snapshot()

    def result(self) -> BoundedResult:
        """The final window once ended (the output closed), else the window so far."""
        return self.snapshot()

    @property
    def reason(self) -> EndReason | None:
        """Why the job ended with its host: the stop its host began, once that killed it; else None."""
        return self.stop_reason if isinstance(self.end, core.Killed) else None

    def row(self) -> JobRow:
        """The job as jobs.list shows it: its counts are its window's (bytes and lines)."""
        window = self.snapshot()
        exit_code, killed = end_fields(self.end)
        return JobRow(
            id=self.id,
            kind=self.spec.kind,
            command=self.spec.command,
            status="running" if self.running else "ended",
            started_ms=self.started_ms,
            bytes_kept=window.bytes_kept,
            bytes_dropped=window.bytes_dropped,
            lines_kept=window.lines_kept,
            lines_dropped=window.lines_dropped,
            exit_code=exit_code,
            killed=killed,
            reason=self.reason,
            tty=self.terminal is not None,
        )

    def screen(self) -> str | None:
        """What a model reads of a tty job (its screen or scrollback), marking where the next write's answer starts;
        None for any other job."""
        if self.terminal is None:
            return None
        text = self.terminal.text()
        self.terminal.mark()
        return text

    def answer(self, verdict: core.EndedInTime | core.DeadlinePassed, waited_ms: int) -> Settled | Detached:
        """A blocking call's answer from its wait's verdict: the end and the final window, or the window so far."""
        if isinstance(verdict, core.DeadlinePassed):
            return Detached(
                job=self.id,
                kind=self.spec.kind,
                command=self.spec.command,
                budget_ms=waited_ms,
                output=self.snapshot().to_record(),
                screen=self.screen(),
            )
        exit_code, killed = end_fields(verdict.end)
        cell = self.cell
        return Settled(
            job=self.id,
            kind=self.spec.kind,
            command=self.spec.command,
            exit_code=exit_code,
            killed=killed,
            output=self.result().to_record(),
            outcome=None if cell is None else cell.outcome,
            result=None if cell is None else cell.result,
            error=None if cell is None else cell.error,
            reason=self.reason,
            screen=self.screen(),
            displays=[] if cell is None else list(cell.displays),
            displays_notice=None if cell is None else cell.displays_notice,
            displays_dropped=0 if cell is None else cell.displays_dropped,
            left_running=self.left_as,
        )

    def on_end_once(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call `wake` once at the end (for wait_until); answers a function that calls it off."""
        self._end_waiters.append(wake)

        def cancel() -> None:
            if wake in self._end_waiters:
                self._end_waiters.remove(wake)

        return cancel

    def __repr__(self) -> str:
        return f"Job({self.id!r}, {self.spec.kind}, {self._state})"


def end_fields(end: core.End | None) -> tuple[int | None, bool]:
    """(exit_code, killed) of an end: the exit code, or null and killed; (None, False) while running."""
    if isinstance(end, core.Exited):
        return end.code, False
    return None, isinstance(end, core.Killed)
