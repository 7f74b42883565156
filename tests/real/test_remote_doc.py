"""The docs/remote.md Python example runs as written and prints what the doc says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

DOC = Path(__file__).resolve().parents[2] / "docs" / "remote.md"


def test_the_remote_doc_example_prints_what_the_doc_says(tmp_path: Path) -> None:
    match = re.search(r"From Python.*?```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", DOC.read_text(), re.S)
    assert match is not None
    code, printed = match.groups()
    env = {**os.environ, "EUKHE_CODING_AGENT_DIR": str(tmp_path / "agent"), "TMPDIR": str(tmp_path)}
    env.pop("EUKHE_SESSION_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
