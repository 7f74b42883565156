"""The tour in docs/jobs.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "jobs.md"


@pytest.mark.real
def test_the_jobs_tour_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(DOC), "exec"), {"__name__": "tour"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "detached 200"
    assert lines[1].startswith("DeadlinePassed(at_ms=")
    assert lines[2].endswith("Killed()")
