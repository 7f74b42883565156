"""Shared test set-up: Hypothesis profiles chosen by HYPOTHESIS_PROFILE (dev by default, ci under CI), the kernel's
Python, git as on any machine, and a check that every test leaves this process's signal state as it found it."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.signal_support import put_back, signal_state

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# Sessions run their cells on the installed kernel venv; the suite runs them on its own interpreter instead (the
# spec's user Python: nothing is installed). Tests of the kernel environment set or remove this themselves.
os.environ.setdefault("EUKHE_KERNEL_PYTHON", sys.executable)

# Git as on a machine with no user: no system or user config (no identity: a test that commits gives its own), no
# global excludes file (~/.config/git/ignore would take files out of every listing the tests compare), and nothing
# from a calling git (a hook's GIT_DIR or GIT_INDEX_FILE would point the tests' repositories elsewhere).
for _name in [name for name in os.environ if name.startswith("GIT_")]:
    del os.environ[_name]
os.environ.update(
    GIT_CONFIG_GLOBAL=os.devnull,
    GIT_CONFIG_NOSYSTEM="1",
    GIT_CONFIG_COUNT="1",
    GIT_CONFIG_KEY_0="core.excludesFile",
    GIT_CONFIG_VALUE_0=os.devnull,
)


@pytest.fixture(autouse=True)
def _signal_state_is_put_back() -> Iterator[None]:
    """A test that changes this process's signal handling or mask puts it back: what it left would reach every
    process a later test spawns (an ignored or blocked SIGINT is inherited across exec)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal_state()
    yield
    after = signal_state()
    if after == before:
        return
    changed = put_back(before)
    pytest.fail(f"the test left this process's signal state changed: handlers of {changed}; {before[2]} -> {after[2]}")
