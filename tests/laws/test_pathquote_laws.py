"""Laws of the listing names (eukhe.core.pathquote): one line each, unambiguous, and ordinary names unchanged."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.pathquote import needs_quotes, quote_path, unquote_path

names = st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1, max_size=30)


@given(names)
def test_pathquote_round_trips_and_is_one_line(name: str) -> None:
    line = quote_path(name)
    assert unquote_path(line) == name
    assert "\n" not in line and "\r" not in line
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in line)


@given(names)
def test_pathquote_a_line_is_quoted_exactly_when_it_needs_to_be(name: str) -> None:
    line = quote_path(name)
    assert (line == name) is not needs_quotes(name)
    assert line.startswith('"') is needs_quotes(name)


def test_pathquote_round_trips_every_short_name_of_a_hostile_alphabet_small_scope() -> None:
    alphabet = ["a", '"', "\\", "\n", "\t", "\r", "\x1b", "\x7f", "\x85", "x", ":"]
    for size in range(1, 4):
        for chars in itertools.product(alphabet, repeat=size):
            name = "".join(chars)
            assert unquote_path(quote_path(name)) == name
