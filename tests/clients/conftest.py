"""Fixtures of the client tests: a private world per test (its own daemon, TMPDIR, HOME), as tests/real has, with
the agent dir where a client that passes only HOME and TMPDIR to the servers it starts (Codex) leads eukhe too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.real.conftest import DaemonEnv, private_world


@pytest.fixture
def world() -> Iterator[DaemonEnv]:
    """A private world whose agent dir is `HOME/.eukhe` (eukhe's default under that HOME); its daemon is stopped at
    the end."""
    with private_world("ekc") as world:
        home = world.root / "home"
        home.mkdir()
        world.env["EUKHE_CODING_AGENT_DIR"] = str(home / ".eukhe")
        yield world
