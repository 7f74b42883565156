"""Writing to a tty job and signalling a job (the shell of `jobs_write` and `jobs_signal`).

`write_to` writes the input to the job's terminal, then waits, on the job's clock, until `core.tty.write_verdict`
says the answer is due: the job ended (settled), the budget passed, the program is idle, or its output has been
quiet for `core.tty.QUIET_MS`. Every wake-up is a real event: output, the end, the terminal taking more input, or a
timer the verdict set. `signal_job` sends one of `core.tty.SIGNALS` to the job's process groups.
"""

from __future__ import annotations

import asyncio
import base64
import signal
from collections.abc import Awaitable, Callable

from eukhe.core import job as core_job
from eukhe.core import tty as core
from eukhe.errors import CodedError, EukheError, InputError
from eukhe.jobs.bash import BashRun
from eukhe.jobs.job import Job, end_fields
from eukhe.jobs.terminal import Terminal
from eukhe.records.jobs import Settled
from eukhe.records.tty import Attached, Signalled, TtyOutput, Written


class JobHasNoTerminalError(EukheError):
    """A write names a job that runs without a terminal: its input is /dev/null."""

    code = "job_has_no_terminal"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} has no terminal: only a bash job started with tty takes input")
        self.job_id = job_id


class JobHasNoProcessGroupError(EukheError):
    """A signal names a job that is no process group of its own (a cell runs in the session's kernel)."""

    code = "job_has_no_process_group"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} is no process group of its own (a cell): jobs_cancel interrupts it")
        self.job_id = job_id


def ended_error(job_id: str, exit_code: int | None, killed: bool, reason: str | None = None) -> CodedError:
    """The refusal of a write or a signal to a job that has ended, saying how it ended."""
    end = "was killed" if killed else f"exited with {exit_code}"
    why = f" ({reason})" if reason else ""
    return CodedError(
        "job_ended",
        f"job {job_id} has ended: it {end}{why}",
        details={"job": job_id, "exit_code": exit_code, "killed": killed, "reason": reason},
    )


def unknown_signal(name: str) -> InputError:
    return InputError(
        "unknown_signal",
        f"signal {name!r} is not one a job may be sent: {', '.join(core.SIGNALS)}",
        field="signal",
        expected=" | ".join(core.SIGNALS),
    )


def refuse_ended(job: Job) -> None:
    """Raise `job_ended` if the job has ended."""
    if job.end is not None:
        exit_code, killed = end_fields(job.end)
        raise ended_error(job.id, exit_code, killed, job.reason)


async def write_to(job: Job, text: str, deadline_ms: int) -> Written | Settled:
    """Write `text` to the job's terminal; answer once `core.tty.write_verdict` says so (see the module)."""
    terminal = job.terminal
    if terminal is None:
        raise JobHasNoTerminalError(job.id)
    refuse_ended(job)
    clock = job.clock
    loop = asyncio.get_running_loop()
    started = clock.now_ms()
    data = text.encode("utf-8", errors="surrogatepass")
    taken = 0
    written_ms = started
    seen = terminal.bytes_total  # output past this came after the write
    last_output: int | None = None
    while True:
        if taken < len(data) and not terminal.closed:
            try:
                taken += terminal.write_some(data[taken:])
            except OSError:
                data = data[:taken]  # the terminal is gone: the job's end follows
            written_ms = clock.now_ms()
        if terminal.bytes_total > seen:
            last_output = terminal.last_output_ms
        pending = taken < len(data)
        facts = core.WriteFacts(
            now_ms=clock.now_ms(),
            written_ms=clock.now_ms() if pending else written_ms,
            last_output_ms=None if pending else last_output,
            idle=not pending and last_output is not None and terminal.idle(),
            ended=job.end is not None,
            deadline_ms=deadline_ms,
        )
        verdict = core.write_verdict(facts)
        if isinstance(verdict, core.Answer):
            break
        woken: asyncio.Future[None] = loop.create_future()

        def wake(*_: object, woken: asyncio.Future[None] = woken) -> None:
            if not woken.done():
                woken.set_result(None)

        stop_output = terminal.listen(wake)
        stop_end = job.on_end_once(wake)
        timer = clock.call_at(verdict.until_ms, wake)
        if pending:
            loop.add_writer(terminal.fd, wake)
        try:
            await woken
        finally:
            stop_output()
            stop_end()
            timer.cancel()
            if pending:
                loop.remove_writer(terminal.fd)
    waited = clock.now_ms() - started
    if verdict.reason == "ended" and job.end is not None:
        answer = job.answer(core_job.EndedInTime(job.end), waited)
        assert isinstance(answer, Settled)
        return answer
    reason = verdict.reason if verdict.reason != "ended" else "quiet"
    answer_written = Written(
        job=job.id,
        reason=reason,
        input_bytes=taken,
        waited_ms=waited,
        view=terminal.view,
        screen=terminal.text(since_mark=terminal.view == "scrollback"),
        output=terminal.since().to_record(),
    )
    terminal.mark()
    return answer_written


def _terminal_of(job: Job) -> Terminal:
    terminal = job.terminal
    if terminal is None:
        raise JobHasNoTerminalError(job.id)
    refuse_ended(job)
    return terminal


async def type_into(job: Job, text: str, deadline_ms: int) -> int:
    """Write `text` to the job's terminal, waiting for no output (an attached person's keys): how many bytes it
    took by the deadline (its input queue may stay full)."""
    terminal = _terminal_of(job)
    loop = asyncio.get_running_loop()
    data = text.encode("utf-8", errors="surrogatepass")
    taken = 0
    while taken < len(data) and job.end is None and job.clock.now_ms() < deadline_ms:
        try:
            taken += terminal.write_some(data[taken:])
        except OSError:
            break
        if taken < len(data):
            writable: asyncio.Future[None] = loop.create_future()

            def wake(writable: asyncio.Future[None] = writable) -> None:
                if not writable.done():
                    writable.set_result(None)

            loop.add_writer(terminal.fd, wake)
            timer = job.clock.call_at(deadline_ms, wake)
            try:
                await writable
            finally:
                loop.remove_writer(terminal.fd)
                timer.cancel()
    return taken


async def attach_to(job: Job, emit: Callable[[TtyOutput], None], drain: Callable[[], Awaitable[None]]) -> Attached:
    """Stream the job's terminal: its screen now, then every byte it writes, until it ends (cancel to leave)."""
    terminal = _terminal_of(job)
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    stop_output = terminal.listen(queue.put_nowait)
    stop_end = job.on_end_once(lambda: queue.put_nowait(None))
    try:
        emit(TtyOutput(data=base64.b64encode(terminal.redraw()).decode()))
        await drain()
        while (chunk := await queue.get()) is not None:
            while not queue.empty() and len(chunk) < 1 << 16:  # what came meanwhile goes as one event
                more = queue.get_nowait()
                if more is None:
                    queue.put_nowait(None)
                    break
                chunk += more
            emit(TtyOutput(data=base64.b64encode(chunk).decode()))
            await drain()
    finally:
        stop_output()
        stop_end()
    exit_code, killed = end_fields(job.end)
    return Attached(job=job.id, ended=True, exit_code=exit_code, killed=killed)


def signal_job(job: Job, name: str) -> Signalled:
    """Send the signal `name` (one of `core.tty.SIGNALS`) to the job's process groups."""
    word = core.signal_named(name)
    if word is None:
        raise unknown_signal(name)
    refuse_ended(job)
    owner = job.owner
    if not isinstance(owner, BashRun):
        raise JobHasNoProcessGroupError(job.id)
    groups = owner.groups()
    owner.send(signal.Signals[f"SIG{word}"])
    return Signalled(job=job.id, signal=word, groups=groups)
