"""The README / docs/python-api.md example runs as written: detach past the budget, wait, rewind stops the orphan."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def example() -> str:
    match = re.search(r"## Example.*?```python\n(.*?)```", DOC.read_text(), re.S)
    assert match is not None
    return match.group(1)


def test_the_python_api_example_runs_exactly_as_documented(tmp_path: Path) -> None:
    env = {**os.environ, "EUKHE_CODING_AGENT_DIR": str(tmp_path / "agent"), "TMPDIR": str(tmp_path)}
    env.pop("EUKHE_SESSION_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", example()], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"\{'job': 'job-[0-9a-f]+', 'budgetMs': 100\}", lines[0])
    assert lines[1] == "{'exitCode': 0, 'killed': False} 'building\\nbuilt\\n'"
    assert lines[2] == "True"
    assert len(list((tmp_path / "agent" / "sessions").iterdir())) == 1
