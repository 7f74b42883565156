"""The CLI's number arguments: a count or a line number is 1 or more, a budget or a size may be 0."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.cli.common import non_negative_int, positive_int
from eukhe.cli.main import build_parser
from eukhe.errors import UsageError


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_positive_int_takes_exactly_the_integers_from_one(value: int) -> None:
    if value >= 1:
        assert positive_int(str(value)) == value
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="1 or more"):
            positive_int(str(value))


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_non_negative_int_takes_exactly_the_integers_from_zero(value: int) -> None:
    if value >= 0:
        assert non_negative_int(str(value)) == value
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="negative"):
            non_negative_int(str(value))


@pytest.mark.parametrize("parse", [positive_int, non_negative_int])
@pytest.mark.parametrize("text", ["", "x", "1.5", "0x10", " "])
def test_a_number_argument_that_is_not_a_decimal_integer_is_refused(parse: Callable[[str], int], text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not a number"):
        parse(text)


def test_fs_read_refuses_line_zero_and_bash_takes_a_budget_of_zero() -> None:
    parser = build_parser()
    with pytest.raises(UsageError, match="--offset: must be 1 or more: 0"):
        parser.parse_args(["fs", "read", "--session", "s", "--offset", "0", "f"])
    args = parser.parse_args(["bash", "--session", "s", "--budget-ms", "0", "--", "true"])
    assert args.budget_ms == 0
