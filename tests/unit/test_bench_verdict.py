"""Every bench's last lines are its targets (bench/verdict.py); bench/run_all.py reads them back: a line printed is
the target parsed, with the verdict it printed."""

from __future__ import annotations

import contextlib
import io
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.verdict import OPERATORS, Target, parse, report

MEASURES = st.text(
    st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters="="), min_size=1, max_size=30
).filter(lambda text: text.strip() == text)
FIGURES = st.floats(min_value=-1e6, max_value=1e6) | st.just(math.nan)


@given(
    measure=MEASURES,
    figure=FIGURES,
    op=st.sampled_from(sorted(OPERATORS)),
    bound=st.floats(min_value=0, max_value=1e5),
    unit=st.sampled_from(["", "x", "ms", "KiB", "MiB"]),
)
def test_a_target_line_reads_back_as_printed(measure: str, figure: float, op: str, bound: float, unit: str) -> None:
    target = Target(measure, figure, op, bound, unit)
    [(read, met)] = parse("noise before\n" + target.line() + "\n")
    assert (read.measure, read.op, read.unit) == (measure, op, unit)
    assert met == target.met == target.line().endswith(" ok")
    if math.isnan(figure):
        assert not met
    else:
        assert math.isclose(read.figure, float(f"{figure:.4g}") if abs(figure) < 1000 else round(figure), rel_tol=1e-9)


@pytest.mark.parametrize(
    ("figure", "op", "bound", "met"),
    [
        (2.0, "<=", 2, True),
        (2.01, "<=", 2, False),
        (2.0, "<", 2, False),
        (0.5, ">=", 0.5, True),
        (0.4, ">", 0.5, False),
    ],
)
def test_the_verdict_is_the_figure_against_its_bound(figure: float, op: str, bound: float, met: bool) -> None:
    assert Target("m", figure, op, bound).met is met


def test_report_prints_the_targets_last_and_says_whether_all_were_met() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        every = report([Target("a", 1.0, "<=", 2, "x"), Target("b", 3.0, "<=", 2, "x")])
    assert not every
    lines = out.getvalue().splitlines()
    assert lines[-2:] == ["target: a = 1 x (<= 2) ok", "target: b = 3 x (<= 2) MISSED"]
    assert [met for _, met in parse(out.getvalue())] == [True, False]
