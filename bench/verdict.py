"""The last lines every benchmark prints: each target, the figure measured against it, and ok or MISSED.

One line a target, `target: <measure> = <figure> [<unit>] (<op> <bound>) ok|MISSED`, so that `bench/run_all.py`
can read them back from any script's output (`parse`) and put every figure in one table.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}
"""How a figure is held against its bound."""

LINE = re.compile(
    r"^target: (?P<measure>.+?) = (?P<figure>\S+)(?: (?P<unit>[^(\s]+))? \((?P<op><=|<|>=|>) (?P<bound>\S+)\)"
    r" (?P<verdict>ok|MISSED)$"
)


@dataclass(frozen=True, slots=True)
class Target:
    """One figure against its target: `figure op bound` is met (a NaN figure never is)."""

    measure: str
    figure: float
    op: str
    bound: float
    unit: str = ""

    @property
    def met(self) -> bool:
        return not math.isnan(self.figure) and OPERATORS[self.op](self.figure, self.bound)

    def line(self) -> str:
        verdict = "ok" if self.met else "MISSED"
        unit = f" {self.unit}" if self.unit else ""
        return f"target: {self.measure} = {number(self.figure)}{unit} ({self.op} {number(self.bound)}) {verdict}"


def number(value: float) -> str:
    """A figure in four significant digits, a large one whole (20108, not 2.011e+04)."""
    return f"{value:.0f}" if math.isfinite(value) and abs(value) >= 1000 else f"{value:.4g}"


def report(targets: Iterable[Target]) -> bool:
    """Print the target lines (the script's last lines); True when every target is met."""
    rows = list(targets)
    print("== targets ==")
    for target in rows:
        print(target.line())
    return all(target.met for target in rows)


def parse(text: str) -> list[tuple[Target, bool]]:
    """The target lines in a script's output, each with the verdict it printed."""
    found = []
    for raw in text.splitlines():
        match = LINE.match(raw.strip())
        if match is None:
            continue
        figure = float(match["figure"])
        target = Target(match["measure"], figure, match["op"], float(match["bound"]), match["unit"] or "")
        found.append((target, match["verdict"] == "ok"))
    return found
