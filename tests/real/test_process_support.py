"""A process a test starts is ended with that test, also when the test fails while it runs: no Popen is left for
the garbage collector to finalize during a later test, whose ResourceWarnings ("subprocess N is still running",
unclosed pipes) would fail that other test."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import tempfile
import warnings
from pathlib import Path

import pytest

from tests.real.conftest import DaemonEnv, make_env

pytestmark = pytest.mark.real


def warnings_when_collected(held: list[object]) -> list[str]:
    """Drop the last references in `held`, collect the garbage, and return the ResourceWarnings finalizers gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        held.clear()
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def fail_while_running(world: DaemonEnv, started: list[subprocess.Popen[str]]) -> None:
    """A test body that starts a process with pipes, then fails before it waits for it."""
    process = world.spawned.add(
        subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    )
    started.append(process)
    raise AssertionError("the deadline passed")  # `process` stays in this frame, which the traceback holds


def test_a_process_dropped_while_it_runs_warns_when_it_is_collected() -> None:
    """What the helper prevents: a Popen that becomes unreachable while its process runs warns then."""
    process = subprocess.Popen(["sleep", "60"])
    pid = process.pid
    held: list[object] = [process]
    del process
    try:
        found = warnings_when_collected(held)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert found == [f"subprocess {pid} is still running"]


def test_a_failed_tests_process_is_ended_by_its_world_and_warns_nowhere_later() -> None:
    root = Path(tempfile.mkdtemp(prefix="ek", dir="/tmp"))
    world = make_env(root)
    started: list[subprocess.Popen[str]] = []
    try:
        with pytest.raises(AssertionError) as failure:  # kept with its traceback, as pytest keeps a failed test's
            fail_while_running(world, started)
        (process,) = started
        assert process.poll() is None  # still running when the test body failed
    finally:
        left = world.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not left
    assert process.returncode == -signal.SIGKILL
    assert process.stdout is not None and process.stdout.closed
    assert process.stderr is not None and process.stderr.closed
    held: list[object] = [failure, process, started]
    del failure, process, started
    assert warnings_when_collected(held) == []
