"""Every text the CLI writes goes through `emit_text`, the one writer that makes text safe on a terminal and leaves it
as it is elsewhere (tests/real/test_cli_terminal.py runs the commands on real pseudo-terminals).

A walk of eukhe/cli finds any `print(...)` or `sys.stdout.write` / `sys.stderr.write` that would bypass it; the only
writers allowed are `emit_text` itself and the two that hand a terminal over on purpose: `eukhe run` (a person's own
command, printed as any program's output would be) and `eukhe jobs attach` (the terminal is the job's while
attached).
"""

from __future__ import annotations

import ast
import io
import os
from pathlib import Path

import pytest

from eukhe.cli.common import emit_text, is_terminal

CLI = Path(__file__).resolve().parents[2] / "eukhe" / "cli"
RAW_ON_PURPOSE = {"run.py", "attach.py"}


def bypasses(source: str) -> list[int]:
    """The lines of `source` that print, or write to sys.stdout or sys.stderr, without emit_text."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        prints = isinstance(function, ast.Name) and function.id == "print"
        writes = (
            isinstance(function, ast.Attribute)
            and function.attr in {"write", "writelines"}
            and isinstance(function.value, ast.Attribute)
            and function.value.attr in {"stdout", "stderr"}
        )
        if prints or writes:
            lines.append(node.lineno)
    return lines


def test_bypasses_finds_what_it_should() -> None:
    source = 'print("x")\nsys.stdout.write("y")\nsys.stderr.writelines([])\nemit_text("z")\nout.write("w")\n'
    assert bypasses(source) == [1, 2, 3]


@pytest.mark.parametrize("module", sorted(path.name for path in CLI.glob("*.py")))
def test_the_cli_writes_text_only_through_emit_text(module: str) -> None:
    found = bypasses((CLI / module).read_text())
    if module not in RAW_ON_PURPOSE:
        assert found == [], f"eukhe/cli/{module} writes at lines {found} without emit_text"


def test_emit_text_leaves_text_as_it_is_off_a_terminal() -> None:
    stream = io.StringIO()
    emit_text("\x1b]52;c;aGk=\x07\u202e\r\n", stream)
    assert stream.getvalue() == "\x1b]52;c;aGk=\x07\u202e\r\n"
    stream.close()
    assert not is_terminal(stream)  # a closed stream is no terminal, and asking does not raise


def test_emit_text_makes_text_safe_on_a_terminal() -> None:
    main, side = os.openpty()
    try:
        with open(side, "w", encoding="utf-8", closefd=True) as terminal:
            assert is_terminal(terminal)
            emit_text("\x1b]0;title\x07\x1b[31mred\x1b[0m\n", terminal)
        shown = os.read(main, 1 << 16)
    finally:
        os.close(main)
    assert shown == b"\\u001b]0;title\\u0007\x1b[31mred\x1b[0m\r\n"
