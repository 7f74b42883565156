"""Every sleep, timeout and deadline of the shell goes through the injected Clock (eukhe/clock.py).

The test lists each direct call of `time.monotonic`, `time.sleep`, `asyncio.sleep` and `asyncio.wait_for` in the
package, outside clock.py, by module and enclosing function, and compares them with a short allowlist, each entry
with its reason. A new direct call fails here: put it on the clock, or add it with a reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import eukhe

PACKAGE = Path(eukhe.__file__).parent
WATCHED = {
    ("time", "monotonic"),
    ("time", "monotonic_ns"),
    ("time", "sleep"),
    ("asyncio", "sleep"),
    ("asyncio", "wait_for"),
}

SYNC_CLI = "blocking code of a CLI command with no event loop, where the async Clock cannot wait"
ALLOWED: dict[tuple[str, str, str], str] = {
    ("eukhe.cli.daemon", "cmd_stop", "time.monotonic"): SYNC_CLI,
    ("eukhe.cli.daemon", "cmd_stop", "time.sleep"): SYNC_CLI,
    ("eukhe.daemon.client", "start_daemon", "time.monotonic"): SYNC_CLI,
    ("eukhe.daemon.client", "start_daemon", "time.sleep"): SYNC_CLI,
    (
        "eukhe.runner",
        "_pump",
        "time.monotonic",
    ): "`eukhe run` is synchronous: its drain after the exit is a select loop",
    ("eukhe.workspace.spawn", "_copy_files", "time.monotonic"): (
        "the spawn's copy runs in a worker thread, without the loop: it times its own share to bound its wait for "
        "the copy helper's"
    ),
    **{
        ("eukhe.sandbox.netproxy", scope, call): (
            "the allowlist's proxy runs on a thread and event loop of its own, apart from the session's and its clock:"
            " its timeouts bound a peer's slowness on real time, and the durations it records are real time"
        )
        for scope, call in (
            ("NetProxy._handle", "asyncio.wait_for"),
            ("NetProxy._handle", "time.monotonic"),
            ("NetProxy._serve", "time.monotonic"),
            ("NetProxy.start.run", "asyncio.sleep"),
        )
    },
    ("eukhe.session.writer", "JobWriter._run", "asyncio.wait_for"): (
        "the journal writer's batching window on real time: on a virtual clock it would hold every write"
    ),
}


def direct_uses() -> set[tuple[str, str, str]]:
    """(module, enclosing function, call) for every watched call outside clock.py."""
    found: set[tuple[str, str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".")
        if module == "eukhe.clock":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found |= _calls_in(tree, module)
    return found


def _calls_in(tree: ast.Module, module: str) -> set[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, f"{scope}.{child.name}" if scope else child.name)
                continue
            name = _watched(child)
            if name is not None:
                found.add((module, scope or "<module>", name))
            visit(child, scope)

    visit(tree, "")
    return found


def _watched(node: ast.AST) -> str | None:
    """`module.function` if `node` names a watched call (`time.sleep`, ...)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (node.value.id, node.attr) in WATCHED:
        return f"{node.value.id}.{node.attr}"
    return None


def test_the_shell_waits_only_on_the_injected_clock_but_for_the_allowlist() -> None:
    uses = direct_uses()
    unexplained = sorted(uses - ALLOWED.keys())
    stale = sorted(ALLOWED.keys() - uses)
    assert not unexplained, f"direct time calls outside eukhe/clock.py, not on the allowlist: {unexplained}"
    assert not stale, f"allowlist entries that no longer occur (remove them): {stale}"


def test_every_allowlist_entry_gives_its_reason() -> None:
    assert all(len(reason.split()) >= 4 for reason in ALLOWED.values())
