"""The kernel stub stays standard-library only (issue 10 item 4): it must start in any sandbox's bare Python, where
the host sends it over stdin and nothing is installed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "eukhe_kernel"


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            roots.add((node.module or "").split(".")[0])
    return roots


def test_every_stub_module_imports_only_the_standard_library() -> None:
    for path in sorted(STUB.rglob("*.py")):
        foreign = imported_roots(path) - set(sys.stdlib_module_names) - {"eukhe_kernel", "__future__"}
        assert not foreign, f"{path.relative_to(ROOT)} imports {foreign}"


def test_the_stub_imports_in_a_python_without_site_packages() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import eukhe_kernel.runtime, eukhe_kernel.api, eukhe_kernel.rlm, eukhe_kernel.rlm.fs\n"
        "print(sorted(m for m in sys.modules if m.startswith('eukhe')))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True, check=True, timeout=60
    )
    assert "'eukhe_kernel.rlm.fs'" in done.stdout
    assert "'eukhe'" not in done.stdout and "eukhe." not in done.stdout  # nothing of the host package
