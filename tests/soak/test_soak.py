"""The soak (bench/soak.py) for 30 seconds: concurrent clients, random operations, faults injected at random times;
every invariant holds (0 violations). Marked `soak` (and `slow`): `pytest -m "not soak"` leaves it out.

SOAK_SECONDS sets its length (60 by default); SOAK_SEED replays a run (the seed is printed either way).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.real
@pytest.mark.timeout(900)
def test_a_soak_with_faults_keeps_every_invariant() -> None:
    seconds = os.environ.get("SOAK_SECONDS", "30")
    seed = os.environ.get("SOAK_SEED", str(int.from_bytes(os.urandom(3), "big")))
    done = subprocess.run(
        [sys.executable, str(SOAK), "--seconds", seconds, "--seed", seed, "--round-seconds", "15", "--min-faults", "3"],
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("SOAK_SUMMARY ")]
    assert lines, f"seed {seed}: no summary\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    summary = json.loads(lines[-1].removeprefix("SOAK_SUMMARY "))
    table = "\n".join(line for line in done.stdout.splitlines() if not line.startswith("SOAK_SUMMARY"))
    assert summary["violations"] == [], f"seed {seed}:\n{table}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"seed {seed}:\n{table}\n{done.stderr[-3000:]}"
    assert sum(summary["operations"].values()) > 100, table  # it did drive the daemon
    assert sum(summary["faults"].values()) >= 3, table  # and it did inject faults (--min-faults waits for them)


def test_the_soak_knows_a_forked_workers_process_name() -> None:
    """The soak finds forked workers (to kill them, as faults) by their process name, which it spells itself."""
    import importlib.util

    from eukhe.daemon.forkserver import WORKER_PROCESS_NAME

    spec = importlib.util.spec_from_file_location("soak_under_test", SOAK)
    assert spec is not None and spec.loader is not None
    soak = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = soak  # its dataclasses look their module up
    try:
        spec.loader.exec_module(soak)
    finally:
        del sys.modules[spec.name]
    assert soak.FORKED_WORKER_NAME == WORKER_PROCESS_NAME
