"""A session's parts (`SessionPart`): the session calls each at its fixed points, in their order (the close in
reverse), so the kernel and the children are members it calls, not layers of hooks."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from eukhe.records.journal import DocPut, JournalRecord
from eukhe.session import Session
from eukhe.session.session import SessionPart


class Recorder:
    """A part that writes down each call it gets."""

    def __init__(self, name: str, calls: list[str]) -> None:
        self.name = name
        self.calls = calls

    def after_reopen(self) -> None:
        self.calls.append(f"{self.name}.after_reopen")

    def rewinding(self, entry_id: str | None) -> Callable[[], None]:
        self.calls.append(f"{self.name}.rewinding {entry_id}")
        return lambda: self.calls.append(f"{self.name}.rewound")

    def records_left_behind(self, fork_id: str) -> list[JournalRecord]:
        self.calls.append(f"{self.name}.left_behind")
        return [DocPut(type="test.left", key=self.name, value=fork_id)]

    async def close(self) -> None:
        self.calls.append(f"{self.name}.close")


def test_a_session_calls_its_parts_in_order_and_closes_them_in_reverse(tmp_path: Path) -> None:
    calls: list[str] = []

    def parts(session: Session) -> Sequence[SessionPart]:
        return [Recorder("kernel", calls), Recorder("children", calls)]

    async def scenario() -> None:
        root = tmp_path / "sessions"
        session = await Session.create(tmp_path, root=root, parts=parts)
        assert [part.name for part in session.parts if isinstance(part, Recorder)] == ["kernel", "children"]
        assert session.part(Recorder).name == "kernel"
        first = session.append("user", {"text": "one"})
        await session.navigate_tree(first.id)
        assert calls == [f"kernel.rewinding {first.id}", f"children.rewinding {first.id}", "kernel.rewound",
                         "children.rewound"]  # fmt: skip
        calls.clear()
        forked = await session.fork(first.id)
        assert calls[:2] == [f"kernel.rewinding {first.id}", f"children.rewinding {first.id}"]
        assert calls[2:] == ["kernel.left_behind", "children.left_behind", "kernel.rewound", "children.rewound"]
        calls.clear()
        await session.close()
        assert calls == ["children.close", "kernel.close"]
        calls.clear()
        parent = await Session.open(forked.parent or "", root=root, parts=parts)
        assert calls == ["kernel.after_reopen", "children.after_reopen"]
        assert parent.view_state().of_type("test.left") == {"kernel": forked.session, "children": forked.session}
        await parent.close()

    asyncio.run(scenario())


def three_argument_type_calls(source: str) -> int:
    """How many `type(name, bases, namespace)` calls (a class made at run time) `source` holds."""
    return sum(
        1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "type"
        and len(node.args) == 3
    )


def test_no_session_class_is_made_at_run_time() -> None:
    """What a session hosts comes in as its parts: the package makes no class with `type(...)` (the daemon's
    sessions are `DaemonSessions`, which give each session its parts)."""
    package = Path(__file__).resolve().parents[2] / "eukhe"
    made = [str(path) for path in sorted(package.rglob("*.py")) if three_argument_type_calls(path.read_text())]
    assert not made
    assert three_argument_type_calls('type("X", (object,), {})\ntype(x)\n') == 1
