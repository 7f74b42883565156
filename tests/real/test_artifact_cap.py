"""An artifact's cap as a user meets it (docs/output.md, "The artifact's cap"): `artifact_max_bytes` in the user's
settings; a flood through `eukhe run` and through a daemon's bash job leaves an artifact within the cap that holds
the flood's head and tail exactly, with a marker line stating exactly what was left out; the answer says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eukhe.core import artifact as core
from tests.laws.artifact_support import MARKER, check_closed
from tests.real.conftest import DaemonEnv

pytestmark = pytest.mark.real

CAP = 65_536
LINES = 300_000
FLOOD = b"".join(b"%d\n" % number for number in range(1, LINES + 1))
"""What `seq 1 LINES` writes: about 2 MB, some 30 caps."""


def configure(agent_dir: Path, **settings: object) -> None:
    agent_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (agent_dir / "settings.json").write_text(json.dumps(settings))


def check_answer(output: dict[str, object]) -> None:
    """The answer's window is the flood's last lines as ever; its artifact is the flood capped, and says so."""
    kept = core.kept(core.Shape(CAP), len(FLOOD))
    assert output["bytes_kept"] + output["bytes_dropped"] == len(FLOOD)  # type: ignore[operator]
    assert FLOOD.endswith(str(output["text"]).encode())
    assert output["artifact_bytes_dropped"] == kept.dropped
    notice = output["notice"]
    assert isinstance(notice, str)
    assert f"the output's head and tail, {kept.dropped} bytes between them left out: {output['artifact']}]" in notice
    artifact = Path(str(output["artifact"]))
    assert artifact.stat().st_size <= CAP
    body = artifact.read_bytes()
    check_closed(FLOOD, CAP, body)
    marker = MARKER.match(body[kept.head : len(body) - kept.tail])
    assert marker is not None
    middle = FLOOD[kept.head : len(FLOOD) - kept.tail]
    assert (int(marker["dropped"]), int(marker["newlines"])) == (len(middle), middle.count(b"\n"))


def test_a_flood_through_eukhe_run_leaves_an_artifact_within_the_cap(tmp_path: Path) -> None:
    home = tmp_path / "agent"
    configure(home, artifact_max_bytes=CAP)
    done = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "run", "--json", "--", "seq", "1", str(LINES)],
        env={**os.environ, "EUKHE_CODING_AGENT_DIR": str(home)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    check_answer(answer["output"])
    assert Path(answer["output"]["artifact"]).parent == home / "artifacts"


def test_a_bad_cap_is_refused_by_name(tmp_path: Path) -> None:
    home = tmp_path / "agent"
    configure(home, artifact_max_bytes=core.MIN_CAP - 1)
    done = subprocess.run(
        [sys.executable, "-m", "eukhe.cli.main", "run", "--json", "--", "true"],
        env={**os.environ, "EUKHE_CODING_AGENT_DIR": str(home)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    refusal = json.loads(done.stdout)
    assert refusal["error"] == "bad_setting" and refusal["field"] == "artifact_max_bytes", refusal
    assert str(home / "settings.json") in refusal["message"]


def test_a_flood_through_a_daemon_job_leaves_an_artifact_within_the_cap(world: DaemonEnv, tmp_path: Path) -> None:
    configure(world.agent_dir, artifact_max_bytes=CAP)
    session = world.json("session", "create", "--cwd", str(tmp_path))["id"]
    answer = world.json("bash", "--session", session, "--", f"seq 1 {LINES}")
    assert answer["status"] == "settled" and answer["exit_code"] == 0, answer
    check_answer(answer["output"])
    (artifact,) = (world.agent_dir / "sessions" / session / "artifacts").iterdir()
    assert str(artifact) == answer["output"]["artifact"]
    shown = world.json("session", "show", session)  # the journal's copy of the answer says it too
    rows = [entry["content"] for entry in shown["entries"] if entry["kind"] == "notice"]
    assert [row["output"]["artifact_bytes_dropped"] for row in rows] == [answer["output"]["artifact_bytes_dropped"]]
