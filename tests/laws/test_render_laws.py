"""Laws of eukhe.core.render: the model-facing text of an output.

Checked with Hypothesis over free text and bytes, and over text built from the pieces terminals see (escape
sequences, carriage-return overwrites, backspaces, invalid UTF-8) so that the interesting cases are common.
"""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from eukhe.core.render import render

PLAIN = st.text(st.characters(exclude_categories=("Cc", "Cs")) | st.sampled_from("\n\t"))
"""Plain text: no control character but newline and tab."""

PIECES = st.sampled_from(
    [
        "\x1b[31m",
        "\x1b[0m",
        "\x1b[2K",
        "\x1b[1;32;40m",
        "\x1b]0;title\x07",
        "\x1b]8;;http://x\x1b\\",
        "\x1bP1$r\x1b\\",
        "\x1b(B",
        "\x1b7",
        "\x1b",
        "\x9b2J",
        "\x9d0;t\x9c",
        "\r",
        "\r\n",
        "\b",
        "\x07",
        "\x00",
        "\x7f",
        "\n",
        "\t",
        "50%",
        "100%",
        "[#####     ]",
        "é",
        "\ufffd",
        "\ud800",
        "\udcff",
    ]
)
TERMINAL_TEXT = st.lists(PIECES | PLAIN, max_size=30).map("".join)
TERMINAL_BYTES = st.lists(
    PIECES.map(lambda piece: piece.encode("utf-8", "surrogatepass")) | st.binary(max_size=8), max_size=30
).map(b"".join)
ANY_TEXT = st.text(st.characters(exclude_categories=())) | TERMINAL_TEXT
"""Any str, lone surrogates included (what `surrogateescape` decoding makes of bytes that are not UTF-8)."""
ANY_BYTES = st.binary() | TERMINAL_BYTES
ANY_INPUT = ANY_TEXT | ANY_BYTES

LEFT_OVER = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
"""What never survives rendering: ESC, carriage return, backspace, every other control but newline and tab, and lone
surrogates."""


@given(ANY_INPUT)
def test_render_is_idempotent(raw: bytes | str) -> None:
    once = render(raw)
    assert render(once) == once
    assert render(once.encode()) == once


@given(ANY_INPUT)
def test_render_is_never_longer_than_its_input(raw: bytes | str) -> None:
    assert len(render(raw)) <= len(raw)


@given(ANY_BYTES)
def test_invalid_utf8_becomes_the_replacement_character(raw: bytes) -> None:
    """Bytes render as their UTF-8 decoding with each invalid sequence replaced by U+FFFD (nothing is dropped)."""
    assert render(raw) == render(raw.decode("utf-8", "replace"))


@given(PLAIN)
def test_plain_text_passes_unchanged(text: str) -> None:
    assert render(text) == text
    assert render(text.encode()) == text


@given(ANY_INPUT)
@example("\x1b[")
@example("\x1b]unterminated\nnext line")
def test_no_escape_or_overwrite_control_is_left(raw: bytes | str) -> None:
    assert not LEFT_OVER.search(render(raw))


@given(ANY_INPUT)
def test_newlines_are_kept(raw: bytes | str) -> None:
    """Rendering works within lines: the output has exactly the input's lines (an unterminated control string ends
    at its line's end, so it never swallows a line below)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    assert render(raw).count("\n") == text.count("\n")


@given(PLAIN.filter(lambda text: "\n" not in text), PLAIN.filter(lambda text: "\n" not in text))
def test_a_carriage_return_overwrite_leaves_the_line_as_a_terminal_shows_it(first: str, second: str) -> None:
    shown = render(first + "\r" + second)
    assert shown == second + first[len(second) :]


@given(st.lists(st.integers(0, 100), min_size=1, max_size=50))
def test_a_progress_bar_collapses_to_its_last_state(steps: list[int]) -> None:
    bar = "".join(f"\r{step:3d}% [{'#' * (step // 10):<10}]" for step in steps)
    assert render(bar + "\ndone\n") == f"{steps[-1]:3d}% [{'#' * (steps[-1] // 10):<10}]\ndone\n"


SEQUENCES = PIECES.filter(lambda piece: piece.startswith(("\x1b", "\x9b", "\x9d")) and piece != "\x1b")
"""Whole escape sequences (a lone ESC is not one: with the character after it, it makes one)."""


@given(PLAIN, st.lists(SEQUENCES, max_size=5))
@example("a", ["\x1b[31m", "\x1b]0;title\x07"])
def test_escape_sequences_are_removed_whole(text: str, sequences: list[str]) -> None:
    """Colour and title sequences around plain text leave exactly the text."""
    assert render("".join(sequences) + text + "".join(reversed(sequences))) == text
    assert render(text + "\x1b") == text  # a lone ESC at the end (a cut sequence) goes too


def test_examples() -> None:
    assert render(b"\x1b[1;31merror\x1b[0m: bad\n") == "error: bad\n"
    assert render(b"ok \xff\xfe end") == "ok \ufffd\ufffd end"
    assert render("downloading  10%\rdownloading 100%\r\n") == "downloading 100%\n"
    assert render("abcdef\rXY") == "XYcdef"
    assert render("ab\b\bAB") == "AB"
    assert render("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\") == "link"
    assert render("bell\x07 and nul\x00") == "bell and nul"
    assert render("tab\tstays\n") == "tab\tstays\n"
    assert render("lone \ud800 surrogate") == "lone \ufffd surrogate"
