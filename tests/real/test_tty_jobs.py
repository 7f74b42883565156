"""Interactive jobs on real pseudo-terminals (docs/jobs.md, "Interactive jobs"): a python REPL driven with
jobs_write, a `read -p` prompt answered, Ctrl-C to a `sleep` inside an interactive bash (the shell lives on), less's
first screen and its `q`, exact counts of the raw bytes, a cancel that leaves no process of the job's session, a
plain job refusing writes, and 20 tty jobs at once; unconfined and in the sandbox.

Every wait is on real output (a write of "" reads what came), bounded by deadlines only a hang reaches.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from eukhe.errors import CodedError, EukheError, InputError
from eukhe.jobs.bash import BashOptions
from eukhe.jobs.tty import JobHasNoTerminalError
from eukhe.records.jobs import Detached, Settled
from eukhe.records.sandbox import UNCONFINED, SandboxPolicy
from eukhe.records.settings import SessionSettings
from eukhe.records.tty import Written
from eukhe.sandbox.bwrap import available
from eukhe.session.session import Session

pytestmark = pytest.mark.real

DEADLINE_S = 60.0
PY = os.path.realpath(sys.executable)
"""The Python the jobs run, by its real path: a confined job's /tmp is private, so a venv in a clone under /tmp is
not there (its interpreter, where the venv points, is)."""
SETTINGS = SessionSettings(tool_blocking_budget_ms=20_000)


def policies() -> list[object]:
    confined = pytest.param(
        SandboxPolicy(), id="confined", marks=pytest.mark.skipif(not _bwrap_works(), reason="bwrap does not run here")
    )
    return [pytest.param(UNCONFINED, id="unconfined"), confined]


def _bwrap_works() -> bool:
    try:
        return bool(available())
    except EukheError:
        return False


async def new_session(tmp_path: Path, sandbox: object = UNCONFINED) -> Session:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return await Session.create(
        cwd,
        root=tmp_path / "sessions",
        settings=SETTINGS,
        sandbox=sandbox,  # type: ignore[arg-type]
        bash_options=BashOptions(kill_grace_ms=1_000, drain_ms=50),
    )


async def start(session: Session, command: str, **size: int) -> str:
    answer = await session.execute_bash_and_wait(command, 0, tty=True, **size)
    assert isinstance(answer, Detached), answer
    assert answer.screen is not None
    return answer.job


async def read_until(
    session: Session, job: str, holds: Callable[[Written | Settled], bool], first: str = ""
) -> Written | Settled:
    """Write `first`, then read (write "") until an answer holds, within DEADLINE_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    answer = await session.jobs.write(job, first, 2_000)
    seen = [answer.screen or ""]
    while not holds(answer):
        assert loop.time() < deadline, f"never got there; the job showed: {seen}"
        assert isinstance(answer, Written), f"the job ended first: {answer}"
        answer = await session.jobs.write(job, "", 2_000)
        seen.append(answer.screen or "")
    return answer


def shows(text: str) -> Callable[[Written | Settled], bool]:
    return lambda answer: text in (answer.screen or "")


def settled(answer: Written | Settled) -> bool:
    return isinstance(answer, Settled)


@pytest.mark.parametrize("sandbox", policies())
def test_tty_python_repl_answers_42_and_ends_with_ctrl_d(tmp_path: Path, sandbox: object) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path, sandbox)
        try:
            job = await start(session, f"{PY} -q")
            await read_until(session, job, shows(">>>"))
            answer = await read_until(session, job, shows("42"), "6*7\n")
            assert isinstance(answer, Written)
            assert answer.view == "scrollback"
            assert answer.screen.splitlines()[-2:] == ["42", ">>>"]
            assert "6*7" in answer.output.text  # the raw bytes since the previous answer: the echo, the answer
            interrupted = await read_until(session, job, shows("KeyboardInterrupt"), "while True: pass\n\x03")
            assert isinstance(interrupted, Written)  # Ctrl-C reached the REPL: it lives on
            ended = await read_until(session, job, settled, "\x04")
            assert isinstance(ended, Settled)
            assert (ended.exit_code, ended.killed) == (0, False)
            assert ended.screen is not None and ">>> 6*7\n42\n>>>" in ended.screen
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("sandbox", policies())
def test_tty_read_prompt_is_answered(tmp_path: Path, sandbox: object) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path, sandbox)
        try:
            # As ssh and git ask: on /dev/tty, which only a job with a controlling terminal can open.
            job = await start(session, 'read -p "your name? " name </dev/tty; echo "hello, $name"')
            await read_until(session, job, shows("your name?"))
            ended = await read_until(session, job, settled, "eukhe\n")
            assert isinstance(ended, Settled) and ended.exit_code == 0
            assert ended.screen is not None and ended.screen.splitlines()[-1] == "hello, eukhe"
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("sandbox", policies())
def test_tty_ctrl_c_stops_a_sleep_and_the_interactive_shell_lives_on(tmp_path: Path, sandbox: object) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path, sandbox)
        try:
            job = await start(session, "PS1='ready$ ' exec bash --norc --noprofile -i")
            await read_until(session, job, shows("ready$"))
            await session.jobs.write(job, "sleep 100\n", 500)
            terminal = session.job_table.get(job).terminal  # type: ignore[union-attr]
            assert terminal is not None
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while not _runs(terminal.foreground(), "sleep"):  # the shell made `sleep 100` the foreground group
                assert loop.time() < deadline, "sleep never ran"
                await session.jobs.write(job, "", 50)
            answer = await read_until(session, job, shows("ready$"), "\x03")
            assert isinstance(answer, Written)
            answer = await read_until(session, job, shows("alive 42"), "echo alive $((6*7))\n")
            assert isinstance(answer, Written), "the shell lives on after the Ctrl-C"
            assert not _runs(terminal.foreground(), "sleep")
        finally:
            await session.close()

    asyncio.run(scenario())


def _runs(group: int | None, name: str) -> bool:
    if group is None:
        return False
    try:
        return psutil.Process(group).name() == name
    except psutil.Error:
        return False


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed (.ci/run installs it)")
def test_tty_less_shows_its_first_screen_and_q_quits_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        try:
            (session.cwd / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
            job = await start(session, "less long.txt", cols=80, rows=24)
            answer = await read_until(session, job, shows("line 23"))
            assert isinstance(answer, Written)
            assert answer.view == "screen"
            lines = answer.screen.splitlines()
            assert lines[:23] == [f"line {i}" for i in range(1, 24)]  # the first screen: 23 lines, then less's prompt
            assert "line 24" not in answer.screen
            ended = await read_until(session, job, settled, "q")
            assert isinstance(ended, Settled) and ended.exit_code == 0
        finally:
            await session.close()

    asyncio.run(scenario())


def test_tty_counts_are_exact_on_the_raw_bytes(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        try:
            job = await start(session, f"{PY} -c \"import sys; [print('x' * 99) for _ in range(3000)]\"")
            ended = await read_until(session, job, settled)
            assert isinstance(ended, Settled) and ended.exit_code == 0
            window = ended.output
            assert window.bytes_kept + window.bytes_dropped == 3000 * 101  # the terminal writes "\r\n"
            assert window.lines_kept + window.lines_dropped == 3000
            assert window.artifact is not None
            raw = Path(window.artifact).read_bytes()
            assert raw == b"x" * 99 + b"\r\n" + raw[101:] and len(raw) == 3000 * 101
            assert ended.screen is not None and ended.screen.splitlines()[-1] == "x" * 99
        finally:
            await session.close()

    asyncio.run(scenario())


def test_tty_cancel_leaves_no_process_of_the_jobs_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        try:
            job = await start(session, "PS1='ready$ ' exec bash --norc --noprofile -i")
            await read_until(session, job, shows("ready$"))
            await read_until(session, job, shows("ready$ sleep 200"), "(sleep 300 &) ; sleep 200 &\nsleep 200\n")
            terminal = session.job_table.get(job).terminal  # type: ignore[union-attr]
            assert terminal is not None
            sid = terminal.session()
            assert sid is not None
            assert len(_in_session(sid)) >= 3
            ended = await session.jobs.cancel(job)
            assert isinstance(ended, Settled) and ended.killed
            assert _in_session(sid) == []
        finally:
            await session.close()

    asyncio.run(scenario())


def _in_session(sid: int) -> list[int]:
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getsid(process.pid) == sid:
                found.append(process.pid)
        except (OSError, psutil.Error):
            continue
    return found


def test_tty_plain_job_refuses_writes_and_ended_jobs_and_unknown_signals_are_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        try:
            plain = await session.execute_bash_and_wait("sleep 100", 0)
            assert isinstance(plain, Detached) and plain.screen is None
            with pytest.raises(JobHasNoTerminalError) as refused:
                await session.jobs.write(plain.job, "hi\n")
            assert refused.value.code == "job_has_no_terminal"
            with pytest.raises(InputError) as bad:
                session.jobs.signal(plain.job, "STOP")
            assert (bad.value.code, bad.value.field) == ("unknown_signal", "signal")
            sent = session.jobs.signal(plain.job, "sigterm")
            assert sent.signal == "TERM" and sent.groups
            ended = await session.jobs.wait(plain.job)
            assert isinstance(ended, Settled) and ended.exit_code == 128 + 15
            with pytest.raises(CodedError) as gone:
                session.jobs.signal(plain.job, "INT")
            assert gone.value.code == "job_ended"
            assert gone.value.details() == {"job": plain.job, "exit_code": 143, "killed": False, "reason": None}
            job = await start(session, "exit 3")
            assert isinstance(await session.jobs.wait(job), Settled)
            with pytest.raises(CodedError) as ended_tty:
                await session.jobs.write(job, "x\n")
            assert ended_tty.value.code == "job_ended"
            assert ended_tty.value.details() == {"job": job, "exit_code": 3, "killed": False, "reason": None}
        finally:
            await session.close()

    asyncio.run(scenario())


def test_tty_twenty_jobs_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        try:
            jobs = await asyncio.gather(*(start(session, f"{PY} -q") for _ in range(20)))
            await asyncio.gather(*(read_until(session, job, shows(">>>")) for job in jobs))
            answers = await asyncio.gather(
                *(read_until(session, job, shows(f"{i * 1000 + 7}"), f"{i} * 1000 + 7\n") for i, job in enumerate(jobs))
            )
            assert all(isinstance(answer, Written) for answer in answers)
            ends = await asyncio.gather(*(read_until(session, job, settled, "\x04") for job in jobs))
            assert [(end.exit_code, end.killed) for end in ends if isinstance(end, Settled)] == [(0, False)] * 20
        finally:
            await session.close()

    asyncio.run(scenario())


def test_tty_a_rewind_stops_a_tty_job_started_after_its_target_and_its_record_is_kept(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await new_session(tmp_path)
        try:
            target = session.append("user", "one")
            job = await start(session, "PS1='ready$ ' exec bash --norc --noprofile -i")  # it ignores SIGTERM
            await read_until(session, job, shows("ready$"))
            rewound = await session.navigate_tree(target.id)
            assert rewound.stopped_jobs == [job]
            (row,) = [row for row in session.jobs.list() if row.id == job]
            assert (row.status, row.killed, row.tty) == ("ended", True, True)
            assert row.bytes_kept + row.bytes_dropped > 0
        finally:
            await session.close()
        reopened = await Session.open(session.id, root=tmp_path / "sessions")
        try:
            with pytest.raises(CodedError) as gone:  # a job of an earlier life has ended: its recorded end
                await reopened.jobs.write(job, "x")
            assert gone.value.code == "job_ended"
            assert gone.value.details() == {"job": job, "exit_code": None, "killed": True, "reason": None}
        finally:
            await reopened.close()

    asyncio.run(scenario())
