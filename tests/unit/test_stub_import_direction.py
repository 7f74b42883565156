"""The kernel stub's modules import one way (eukhe_kernel/main.py): `protocol`, `snapshot`, `frames`, `calls`,
`pictures` <- `runtime` <- `api` <- `rlm` <- `main`. No stub module imports another inside a function (a lazy
import that hides a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

STUB = Path(__file__).resolve().parents[2] / "eukhe_kernel"

LAYERS = {
    "eukhe_kernel": 0,
    "eukhe_kernel.protocol": 0,
    "eukhe_kernel.snapshot": 0,
    "eukhe_kernel.frames": 0,
    "eukhe_kernel.calls": 0,
    "eukhe_kernel.pictures": 0,
    "eukhe_kernel.runtime": 1,
    "eukhe_kernel.api": 2,
    "eukhe_kernel.rlm": 3,
    "eukhe_kernel.main": 4,
    "eukhe_kernel.__main__": 5,
}
"""Each module's layer (an `eukhe_kernel.rlm.*` module is in `rlm`'s): a module imports from its own layer or lower."""


def module_name(path: Path) -> str:
    parts = path.relative_to(STUB.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    name = module
    while name not in LAYERS:
        name = name.rpartition(".")[0]
        assert name, f"no layer for {module!r}: add the new module to LAYERS"
    return LAYERS[name]


def stub_imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """Every stub module `tree` imports, and whether the import is inside a function."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, inside: bool) -> None:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module is not None:
            # `from eukhe_kernel import api` imports module eukhe_kernel.api
            names = [
                f"{node.module}.{alias.name}" if node.module == "eukhe_kernel" else node.module for alias in node.names
            ]
        found.extend((name, inside) for name in names if name.split(".")[0] == "eukhe_kernel")
        for child in ast.iter_child_nodes(node):
            visit(child, inside or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(tree, inside=False)
    return found


def violations(name: str, tree: ast.AST) -> list[str]:
    """What breaks the import direction in module `name`."""
    wrong: list[str] = []
    for target, inside in stub_imports(tree):
        if inside:
            wrong.append(f"{name} imports {target} inside a function")
        if layer(target) > layer(name):
            wrong.append(f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})")
    return wrong


def stub_modules() -> dict[str, ast.AST]:
    return {module_name(path): ast.parse(path.read_text()) for path in sorted(STUB.rglob("*.py"))}


def test_the_stub_imports_one_way_and_never_inside_a_function() -> None:
    modules = stub_modules()
    assert {"eukhe_kernel.runtime", "eukhe_kernel.calls", "eukhe_kernel.rlm.remote"} <= set(modules)
    wrong = [line for name, tree in modules.items() for line in violations(name, tree)]
    assert not wrong, "\n".join(wrong)


def test_the_runtime_imports_nothing_of_api_nor_rlm() -> None:
    imported = {target for target, _ in stub_imports(stub_modules()["eukhe_kernel.runtime"])}
    assert not {target for target in imported if target.startswith(("eukhe_kernel.rlm", "eukhe_kernel.api"))}


def test_the_check_sees_a_lazy_import_and_an_upward_one() -> None:
    lazy = ast.parse("def f():\n    from eukhe_kernel.rlm.remote import cancel\n")
    assert violations("eukhe_kernel.runtime", lazy) == [
        "eukhe_kernel.runtime imports eukhe_kernel.rlm.remote inside a function",
        "eukhe_kernel.runtime (layer 1) imports eukhe_kernel.rlm.remote (layer 3)",
    ]
    upward = ast.parse("from eukhe_kernel import api, frames\n")
    assert violations("eukhe_kernel.calls", upward) == [
        "eukhe_kernel.calls (layer 0) imports eukhe_kernel.api (layer 2)"
    ]
    assert violations("eukhe_kernel.rlm.fs", ast.parse("from eukhe_kernel.rlm.answers import Answer\n")) == []
