"""Laws of MCP logging's decisions (`eukhe.core.mcp_log`): each diagnostic's level, and which ones a client gets.

The domain is small (eight levels, a threshold or none, Python's level numbers), so each law is checked on all of
it. The references are written from the rules in the module's docstring, not from its code.
"""

from __future__ import annotations

import logging

import pytest

from eukhe.core.mcp_log import LEVELS, Level, level_of, wanted

SEVERITY = {name: rank for rank, name in enumerate(["debug", "info", "notice", "warning", "error", "critical"])}
SEVERITY |= {"alert": 6, "emergency": 7}


def test_the_levels_are_mcps_least_severe_first() -> None:
    assert list(LEVELS) == sorted(SEVERITY, key=SEVERITY.__getitem__)


@pytest.mark.parametrize(
    ("python", "mcp"),
    [
        (logging.DEBUG, "debug"),
        (logging.INFO, "info"),
        (logging.WARNING, "warning"),
        (logging.ERROR, "error"),
        (logging.CRITICAL, "critical"),
    ],
)
def test_level_of_names_a_python_level_by_its_own_name(python: int, mcp: Level) -> None:
    assert level_of(python) == mcp


def test_level_of_is_monotone_and_a_level_between_two_takes_the_lower_ones_name_small_scope() -> None:
    named = [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL]
    for number in range(0, 100):
        below = max((level for level in named if level <= number), default=logging.DEBUG)
        assert level_of(number) == level_of(below), number
        assert SEVERITY[level_of(number)] <= SEVERITY[level_of(number + 1)], number


def test_wanted_is_nothing_before_a_level_is_set_and_at_or_above_it_after_small_scope() -> None:
    for level in LEVELS:
        assert not wanted(level, None), level
        for threshold in LEVELS:
            assert wanted(level, threshold) is (SEVERITY[level] >= SEVERITY[threshold]), (level, threshold)
