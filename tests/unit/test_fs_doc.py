"""The docs/fs.md example runs as written and prints what the doc says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "fs.md"


def test_the_fs_doc_example_prints_what_the_doc_says(tmp_path: Path) -> None:
    text = DOC.read_text()
    match = re.search(r"## Calling them.*?```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", text, re.S)
    assert match is not None
    code, printed = match.groups()
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the example's temporary directory goes with the test's
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
