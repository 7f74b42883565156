"""The core stays pure: no module in eukhe/core imports I/O, clock, asyncio or the rest of the package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "eukhe" / "core"
FORBIDDEN_ROOTS = {
    "os",
    "io",
    "sys",
    "time",
    "datetime",
    "asyncio",
    "socket",
    "subprocess",
    "threading",
    "multiprocessing",
    "signal",
    "select",
    "selectors",
    "shutil",
    "tempfile",
    "pathlib",
    "random",
    "secrets",
    "uuid",
    "logging",
    "fcntl",
    "pty",
    "mmap",
    "ctypes",
    "concurrent",
    "urllib",
    "http",
    "sqlite3",
    "glob",
    "builtins",
}
ALLOWED_ROOTS = {
    "__future__",
    "dataclasses",
    "enum",
    "typing",
    "collections",
    "functools",
    "itertools",
    "math",
    "abc",
    "re",
    "json",
    "hashlib",
    "types",
    "operator",
    "bisect",
    "struct",
    "codecs",
    "string",
    "hmac",  # compare_digest: a constant-time comparison, no I/O
    "ipaddress",  # parsing and classifying addresses, no I/O
}


def imported_roots(source: str) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                roots.add(".")  # relative imports stay inside eukhe.core; checked by name below
                if node.module and not all(part for part in node.module.split(".")):
                    roots.add("..")
            else:
                roots.add((node.module or "").split(".")[0])
                if (node.module or "").startswith("eukhe") and not (node.module or "").startswith("eukhe.core"):
                    roots.add("eukhe-shell")
    return roots


CORE_FILES = sorted(CORE.rglob("*.py"))


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_core_module_imports_only_pure_modules(path: Path) -> None:
    roots = imported_roots(path.read_text())
    assert not roots & FORBIDDEN_ROOTS, f"{path.name} imports {roots & FORBIDDEN_ROOTS}"
    assert "eukhe-shell" not in roots, f"{path.name} imports the shell"
    unknown = roots - ALLOWED_ROOTS - {".", "eukhe"}
    assert not unknown, f"{path.name} imports modules not known to be pure: {unknown}"


def test_the_purity_walk_catches_a_forbidden_import() -> None:
    assert "os" in imported_roots("import os.path\n")
    assert "eukhe-shell" in imported_roots("from eukhe.output import BoundedOutput\n")
    assert "asyncio" in imported_roots("def f():\n    import asyncio\n")
