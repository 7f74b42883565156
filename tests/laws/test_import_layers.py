"""Straight layers: no module imports one from a layer above its own (a test walks every import, also the ones
inside functions).

The order, bottom first (`A ← B`: B may import A, never the reverse):

    core ← base ← store ← skills ← jobs, harness, fs, workspace ← session ← kernel ← children ← calls ← api ← daemon
    ← mcp ← cli

- core: the pure decisions (`eukhe.core`).
- base: what every layer shares and that decides nothing of its own: the records (the vocabulary), the error
  catalogue, paths, the one write-all and atomic write, private files and dirs, process facts, the clocks, the
  output bounder's shell and `eukhe run`'s runner.
- skills: the Agent Skills found on disk (discovery over the core's decisions); the kernel, the API, the MCP server
  and the CLI read them.
- jobs, harness, fs (the file tools) and workspace (a child's copy and hand-back) are siblings: none imports
  another.
- children: a session with children (each a session with its own kernel), built on the kernel's session.
- calls: a model's tool calls on such a session, each through its Harness (the catalog of tools, their texts).
- api is the public Python API (the session with its kernel); the daemon and the CLI are its clients.
- mcp is the MCP server (`eukhe mcp`): a client of the daemon, like the CLI; only the CLI imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "eukhe"

LAYERS: list[tuple[str, ...]] = [
    ("eukhe.core",),
    (
        "eukhe",
        "eukhe.records",
        "eukhe.errors",
        "eukhe.paths",
        "eukhe.fsio",
        "eukhe.beneath",
        "eukhe.private_fs",
        "eukhe.procs",
        "eukhe.clock",
        "eukhe.output",
        "eukhe.runner",
    ),
    ("eukhe.store",),
    ("eukhe.skills",),
    ("eukhe.jobs", "eukhe.harness", "eukhe.fs", "eukhe.workspace"),
    ("eukhe.session",),
    ("eukhe.kernel",),
    ("eukhe.children",),
    ("eukhe.calls",),
    ("eukhe.api",),
    ("eukhe.daemon",),
    ("eukhe.mcp",),
    ("eukhe.cli",),
]
"""Bottom first. A module belongs to the longest prefix listed."""

SIBLINGS = {
    frozenset({"eukhe.jobs", "eukhe.harness"}),
    frozenset({"eukhe.jobs", "eukhe.fs"}),
    frozenset({"eukhe.harness", "eukhe.fs"}),
    frozenset({"eukhe.workspace", "eukhe.jobs"}),
    frozenset({"eukhe.workspace", "eukhe.harness"}),
    frozenset({"eukhe.workspace", "eukhe.fs"}),
}


def place(module: str) -> tuple[int, str]:
    """(layer index, the prefix that placed it) of an eukhe module."""
    best: tuple[int, str] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (index, prefix)
    assert best is not None, f"{module} is in no layer"
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(own: str, source: str, is_package: bool = False) -> set[str]:
    """Every eukhe module the source of module `own` imports (relative imports resolved), anywhere in it."""
    package = own if is_package else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from eukhe import api` names a module
    return {name for name in found if name == "eukhe" or name.startswith("eukhe.")}


def violations(own: str, source: str, is_package: bool = False) -> list[str]:
    """The imports of module `own` (its source) that go up the layers or across siblings."""
    level, prefix = place(own)
    bad: list[str] = []
    for imported in sorted(imports_of(own, source, is_package)):
        other_level, other_prefix = place(imported)
        if imported == "eukhe" or (other_prefix == "eukhe" and imported.count(".") == 1 and not _is_module(imported)):
            continue  # the package itself, or a name imported from it
        if other_level > level:
            bad.append(f"{own} ({prefix}) imports {imported} ({other_prefix}), a layer above")
        elif frozenset({prefix, other_prefix}) in SIBLINGS:
            bad.append(f"{own} ({prefix}) imports its sibling {imported} ({other_prefix})")
    return bad


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").exists() or (PACKAGE.parent / relative).is_dir()


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_goes_up_the_layers(path: Path) -> None:
    assert violations(module_name(path), path.read_text(), path.name == "__init__.py") == []


def test_the_walk_catches_an_import_that_goes_up() -> None:
    assert place("eukhe.session.session")[0] < place("eukhe.kernel.session_kernel")[0]
    assert place("eukhe.store.journal")[0] < place("eukhe.harness.harness")[0]
    assert place("eukhe.records.jobs")[0] < place("eukhe.store.dirs")[0]
    session = (PACKAGE / "session" / "session.py").read_text()
    planted = session + "def later() -> None:\n    from eukhe.kernel.session_kernel import KernelSession\n"
    assert violations("eukhe.session.session", planted) == [
        "eukhe.session.session (eukhe.session) imports eukhe.kernel.session_kernel (eukhe.kernel), a layer above",
        "eukhe.session.session (eukhe.session) imports eukhe.kernel.session_kernel.KernelSession (eukhe.kernel), "
        "a layer above",
    ]
    relative = (PACKAGE / "store" / "dirs.py").read_text() + "from ..session import session\n"
    assert violations("eukhe.store.dirs", relative)
    tool = (PACKAGE / "harness" / "tool.py").read_text() + "from eukhe.jobs import Job\n"
    assert any("sibling" in line for line in violations("eukhe.harness.tool", tool))
