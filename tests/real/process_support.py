"""Processes a test starts: each one ended, reaped and its pipes closed when the test ends, whether it passed or not.

A test that fails (an assertion, a deadline, a timeout) while a process it started still runs drops its Popen inside
the failure's traceback, a reference cycle that only the garbage collector frees, during some later test. Popen's
finalizer then warns "subprocess N is still running" and each unclosed pipe warns too; with warnings as errors,
that later test fails instead. A process registered here is ended by its own test's teardown, on every path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any, TypeVar

import psutil

from eukhe.core.jobends import GroupMark
from eukhe.jobs.bash import JOB_MARK_ENV, end_left_group
from eukhe.procs import start_ticks

REAP_DEADLINE_S = 30.0
"""How long a killed process may take to be reaped: only a hang reaches it."""

P = TypeVar("P", bound="subprocess.Popen[Any]")


def end(process: subprocess.Popen[Any], *, group: bool = False) -> None:
    """Kill `process` if it still runs (with `group`, its whole process group), reap it, close its pipes."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
    try:
        process.wait(timeout=REAP_DEADLINE_S)
    finally:
        for stream in (process.stdout, process.stderr, process.stdin):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):  # text stdin flushes what is left into a dead pipe
                    stream.close()


class Spawned:
    """The processes one test started, to be ended together (`end_all`) when it ends."""

    def __init__(self) -> None:
        self._started: list[tuple[subprocess.Popen[Any], bool]] = []

    def add(self, process: P, *, group: bool = False) -> P:
        """Register a started process (with `group`, its own group is killed with it); returns it."""
        self._started.append((process, group))
        return process

    def end_all(self) -> None:
        """End every registered process (each one, even if ending another failed), newest first."""
        errors: list[BaseException] = []
        while self._started:
            process, group = self._started.pop()
            try:
                end(process, group=group)
            except Exception as error:  # raised below, once every process had its turn
                errors.append(error)
        if errors:
            raise errors[0]


@contextlib.contextmanager
def spawned() -> Iterator[Spawned]:
    """A `Spawned` whose processes are ended when the block exits, however it exits."""
    started = Spawned()
    try:
        yield started
    finally:
        started.end_all()


SAME_BOOT = "the test's boot"
"""A test's group is ended in the boot it learned it in: both sides of `group_is_the_jobs`'s boot check."""


def job_group(pgid: int) -> GroupMark | None:
    """A bash job's process group as a reopen would judge it (`eukhe.jobs.bash.end_left_group`): its number, its
    leader's start and the job's mark in the leader's environment; None if the leader has ended already (nothing then
    tells this group from a later one that takes the number)."""
    leader_start = start_ticks(pgid)
    try:
        mark = psutil.Process(pgid).environ().get(JOB_MARK_ENV)
    except psutil.Error:
        return None
    if leader_start is None or mark is None:
        return None
    return GroupMark(pgid, leader_start, mark)


def end_job_group(group: GroupMark | None) -> None:
    """SIGKILL what is left of a dead host's job group, only while it is still that job's: with pid_max at 32768 a
    busy machine takes a number again within seconds, and a kill by number alone would end another test's group."""
    if group is not None:
        end_left_group(group, SAME_BOOT, SAME_BOOT)
