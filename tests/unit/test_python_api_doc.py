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
    assert lines[0] == "detached 100"
    assert lines[1] == "settled 0 'building\\nbuilt\\n'"
    assert lines[2] == "True"
    assert DOC.read_text().count(example()) == 1
    assert example() in (DOC.parents[1] / "README.md").read_text()  # the README shows the same example
    assert len(list((tmp_path / "agent" / "sessions").iterdir())) == 1
