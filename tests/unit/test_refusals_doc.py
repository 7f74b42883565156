"""docs/sandbox.md's "When the sandbox refused" is what the core decides: its table has a row for each rule and no
other, and its example line is the core's words."""

from __future__ import annotations

import re
from pathlib import Path

from eukhe.core.refusals import Refusal, Rule

DOC = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"


def section() -> str:
    return DOC.read_text().split("## When the sandbox refused", 1)[1].split("\n## ", 1)[0]


def test_the_refusals_table_has_a_row_for_each_rule() -> None:
    rows = re.findall(r"^\| `([a-z_]+)` \|", section(), re.M)
    assert rows == [str(rule) for rule in Rule]


def test_the_refusals_example_is_the_cores_line() -> None:
    line = Refusal(Rule.OUTSIDE_WRITABLE_ROOTS, "/home/me/x", "/home/me/x").line()
    assert f"\n[{line}]\n" in section()
