"""`rlm.skills()`: the Agent Skills offered for the session's working directory, as the host found them at the
kernel's start (`EUKHE_KERNEL_SKILLS`, written by the host's launch).

A Python skill's import path is put in front of `sys.path` when this module loads (a wrapped kernel's interpreter
started before its environment arrived, so `PYTHONPATH` alone would not reach it); in a kernel on the kernel venv,
its package is installed there instead and the path is None.
"""

from __future__ import annotations

import json
import os
import sys

from eukhe_kernel.rlm.answers import Answer

SKILLS_VARIABLE = "EUKHE_KERNEL_SKILLS"


def _rows() -> list[dict[str, object]]:
    try:
        rows = json.loads(os.environ.get(SKILLS_VARIABLE) or "[]")
    except ValueError:
        return []
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []


def skills() -> list[Answer]:
    """Each offered skill: `name`, `description`, `scope`, `path` (its directory, as this kernel sees it),
    `python` (a Python package), `import_path` (what `sys.path` got for it, or None)."""
    return [Answer(row) for row in _rows()]


def _put_on_path() -> None:
    """Each Python skill's import path in front of sys.path, in the host's order."""
    paths = [str(row["import_path"]) for row in _rows() if isinstance(row.get("import_path"), str)]
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)


_put_on_path()
