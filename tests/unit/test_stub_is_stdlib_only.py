"""The kernel stub stays standard-library only (spec S3 "Where the sandbox runs"): it must start in any sandbox's bare
Python, where the host sends it over stdin and nothing is installed. A feature may import a package of the kernel's
lock when it is used (inside a function: `@rlm.remote` imports msgspec), never when the stub starts."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "eukhe_kernel"
KERNEL_LOCK_IN = ROOT / "eukhe" / "kernel" / "bootstrap" / "runtime" / "requirements-kernel.in"
OWN = {"eukhe_kernel", "__future__"}


def _roots(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom) and not node.level:
        return {(node.module or "").split(".")[0]}
    return set()


def imported_roots(path: Path) -> tuple[set[str], set[str]]:
    """The roots a module imports when it is imported, and those it imports only inside a function (when used)."""
    eager: set[str] = set()
    lazy: set[str] = set()

    def visit(node: ast.AST, inside: bool) -> None:
        (lazy if inside else eager).update(_roots(node))
        for child in ast.iter_child_nodes(node):
            visit(child, inside or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(path.read_text()), inside=False)
    return eager, lazy


def locked_packages() -> set[str]:
    """The packages the kernel's lock offers cells (requirements-kernel.in, one name a line)."""
    lines = (line.split("#")[0].strip() for line in KERNEL_LOCK_IN.read_text().splitlines())
    return {line.split("=")[0].split("<")[0].split(">")[0].strip().lower() for line in lines if line}


def test_every_stub_module_imports_only_the_standard_library() -> None:
    for path in sorted(STUB.rglob("*.py")):
        eager, lazy = imported_roots(path)
        foreign = eager - set(sys.stdlib_module_names) - OWN
        assert not foreign, f"{path.relative_to(ROOT)} imports {foreign}"
        unlocked = lazy - set(sys.stdlib_module_names) - OWN - locked_packages()
        assert not unlocked, f"{path.relative_to(ROOT)} imports {unlocked}, which the kernel's lock does not offer"


def test_remote_imports_msgspec_only_when_used_and_the_kernel_lock_offers_it() -> None:
    eager, lazy = imported_roots(STUB / "rlm" / "remote.py")
    assert "msgspec" in lazy and "msgspec" not in eager
    assert "msgspec" in locked_packages()


def test_the_stub_imports_in_a_python_without_site_packages() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import eukhe_kernel.runtime, eukhe_kernel.api, eukhe_kernel.rlm, eukhe_kernel.rlm.fs\n"
        "print(sorted(m for m in sys.modules if m.startswith('eukhe')))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True, check=True, timeout=60
    )
    assert "'eukhe_kernel.rlm.fs'" in done.stdout and "'eukhe_kernel.rlm.remote'" in done.stdout
    assert "'eukhe'" not in done.stdout and "eukhe." not in done.stdout  # nothing of the host package


def test_remote_in_a_python_without_msgspec_says_what_it_needs() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from eukhe_kernel import rlm\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "try:\n"
        "    rlm.remote(add)\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error)\n"
        "print('msgspec' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True, check=True, timeout=60
    )
    first, last = done.stdout.strip().splitlines()
    assert first.startswith("ImportError @rlm.remote needs msgspec in the kernel's Python"), first
    assert last == "False"
