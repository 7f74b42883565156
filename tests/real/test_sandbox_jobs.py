"""Confined bash jobs keep every property of a job: exact counts, the group's SIGTERM then SIGKILL, detach; a process
the shell left running, even one that called setsid, goes on as a job of its own, and no process of it outlives that
job's kill (its pid namespace ends with it)."""

from __future__ import annotations

import asyncio
import os
import resource
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from eukhe.jobs.bash import BashOptions
from eukhe.records.jobs import Detached, Settled
from eukhe.records.sandbox import SandboxPolicy
from eukhe.session.session import Session

pytestmark = pytest.mark.real


def tagged(tag: str) -> list[int]:
    """Live processes whose environment holds TAG (what a job's processes carry)."""
    found = []
    wanted = f"SANDBOX_TEST_TAG={tag}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if wanted in environ.split(b"\0") and state != "Z":
            found.append(int(entry))
    return found


async def until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    """Wait for a real event (a file the job writes), bounded by a deadline only a hang reaches."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, "the job never got there"
        await asyncio.sleep(0.01)


async def confined(tmp_path: Path, **options: int) -> Session:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return await Session.create(
        cwd, root=tmp_path / "sessions", sandbox=SandboxPolicy(), bash_options=BashOptions(**options)
    )


def test_a_confined_jobs_setsid_child_goes_on_as_a_job_and_does_not_outlive_its_kill(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex

    async def scenario() -> None:
        session = await confined(tmp_path)
        try:
            command = f"export SANDBOX_TEST_TAG={tag}; setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo started"
            answer = await session.execute_bash_and_wait(command, 30_000)
            assert isinstance(answer, Settled)
            assert answer.output.text == "started\n"
            assert answer.left_running is not None
            assert len(tagged(tag)) == 1  # the sleep runs on, in its sandbox
            ended = await session.jobs.cancel(answer.left_running)
            assert isinstance(ended, Settled) and ended.killed
            assert tagged(tag) == []  # the end came after the namespace was gone
        finally:
            await session.close()

    asyncio.run(scenario())


def test_a_cancelled_confined_job_hears_sigterm_and_one_that_ignores_it_is_killed_after_the_grace(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        session = await confined(tmp_path, kill_grace_ms=300)
        try:
            polite = await session.execute_bash_and_wait(
                "trap 'echo bye > termed; exit 3' TERM; touch ready; sleep 300 & wait", 0
            )
            assert isinstance(polite, Detached)
            await until((session.cwd / "ready").exists)
            ended = await session.jobs.cancel(polite.job)
            assert isinstance(ended, Settled)
            assert ended.killed
            assert (session.cwd / "termed").read_text() == "bye\n"  # SIGTERM reached the command inside
            tag = uuid.uuid4().hex
            stubborn = await session.execute_bash_and_wait(f"export SANDBOX_TEST_TAG={tag}; trap '' TERM; sleep 301", 0)
            assert isinstance(stubborn, Detached)
            gone = await session.jobs.cancel(stubborn.job)
            assert isinstance(gone, Settled)
            assert gone.killed
            assert tagged(tag) == []
        finally:
            await session.close()

    asyncio.run(scenario())


def test_a_confined_jobs_counts_are_exact(tmp_path: Path) -> None:
    async def scenario() -> None:
        session = await confined(tmp_path)
        try:
            answer = await session.execute_bash_and_wait("seq 1 100000", 30_000)
            assert isinstance(answer, Settled)
            written = sum(len(f"{n}\n") for n in range(1, 100001))
            assert answer.output.bytes_kept + answer.output.bytes_dropped == written
            assert answer.output.lines_kept + answer.output.lines_dropped == 100000
            assert answer.exit_code == 0
        finally:
            await session.close()

    asyncio.run(scenario())


def test_a_confined_job_that_cannot_get_its_output_pipe_leaks_no_descriptor(tmp_path: Path) -> None:
    """Out of fds (EMFILE) right after the sandbox's report pipe is made: the start fails, and no fd is left."""

    async def scenario() -> None:
        session = await confined(tmp_path)
        try:
            await session.execute_bash_and_wait("true", 30_000)  # warm: whatever a first job opens once is open
            before = sorted(os.listdir("/proc/self/fd"))
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            fillers = []
            while True:  # fill every gap below the highest fd: the next fds are the lowest free ones
                fd = os.open(os.devnull, os.O_RDONLY)
                fillers.append(fd)
                if fd > max(int(name) for name in before):
                    break
            resource.setrlimit(resource.RLIMIT_NOFILE, (fillers[-1] + 3, hard))  # room for one pipe: the report's
            try:
                with pytest.raises(OSError):
                    await session.execute_bash_and_wait("true", 30_000)
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
                for fd in fillers:
                    os.close(fd)
            assert sorted(os.listdir("/proc/self/fd")) == before
        finally:
            await session.close()

    asyncio.run(scenario())


def test_a_confined_job_cancelled_at_its_start_ends_without_its_grace(tmp_path: Path) -> None:
    """A cancel at once after the start (bwrap has not reported, or its pid 1 has not forked the command) still ends
    the job within a deadline far short of its grace: only a SIGTERM or SIGKILL that took can end it."""

    async def scenario() -> None:
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        session = await Session.create(
            cwd, root=tmp_path / "sessions", sandbox=SandboxPolicy(), bash_options=BashOptions(kill_grace_ms=600_000)
        )
        try:
            for _ in range(5):
                started = await session.execute_bash_and_wait("sleep 300", 0)
                assert isinstance(started, Detached)
                ended = await asyncio.wait_for(session.jobs.cancel(started.job), 60)
                assert isinstance(ended, Settled)
                assert ended.killed
        finally:
            await session.close()

    asyncio.run(scenario())
