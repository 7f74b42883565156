"""Interactive jobs' decisions (`eukhe.core.tty`): the signal table, the terminal's size, when a write's answer is
due, and the screen or the scrollback.

`write_verdict` is checked against its table written out again (`reference`), exhaustively over a small grid of
times and every flag, and with Hypothesis over free ones; its laws: an end always answers `ended`; a passed budget
`budget`; `idle` needs output since the write; a wait always moves time forward and never past the budget; and a
caller that asks again when told, with nothing new, is answered by the budget at the latest (no endless wait).
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.tty import (
    IDLE_POLL_MS,
    MAX_COLS,
    MAX_ROWS,
    MIN_SIZE,
    QUIET_MS,
    SIGNALS,
    Answer,
    Wait,
    WriteFacts,
    signal_named,
    size_problem,
    view_for,
    write_verdict,
)

TIMES = [0, 1, QUIET_MS - 1, QUIET_MS, QUIET_MS + 1, 3 * QUIET_MS]


def reference(facts: WriteFacts) -> Answer | Wait:
    """The module's table, read row by row."""
    if facts.ended:
        return Answer("ended")
    if facts.now_ms >= facts.deadline_ms:
        return Answer("budget")
    came = facts.last_output_ms is not None
    if came and facts.idle:
        return Answer("idle")
    since = facts.written_ms if facts.last_output_ms is None else facts.last_output_ms
    if facts.now_ms - since >= QUIET_MS:
        return Answer("quiet")
    soonest = [since + QUIET_MS, facts.deadline_ms] + ([facts.now_ms + IDLE_POLL_MS] if came else [])
    return Wait(min(soonest))


def grid() -> list[WriteFacts]:
    found = []
    for written, now, deadline in itertools.product(TIMES, TIMES, TIMES):
        if now < written:
            continue
        outputs: list[int | None] = [None, *(t for t in TIMES if written <= t <= now)]
        for last, idle, ended in itertools.product(outputs, (False, True), (False, True)):
            found.append(WriteFacts(now, written, last, idle, ended, deadline))
    return found


@st.composite
def facts(draw: st.DrawFn) -> WriteFacts:
    written = draw(st.integers(0, 10_000))
    now = written + draw(st.integers(0, 10_000))
    last = draw(st.none() | st.integers(written, now))
    return WriteFacts(now, written, last, draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 30_000)))


def check(case: WriteFacts) -> None:
    verdict = write_verdict(case)
    assert verdict == reference(case), case
    if case.ended:
        assert verdict == Answer("ended")
    elif case.now_ms >= case.deadline_ms:
        assert verdict == Answer("budget")
    if verdict == Answer("idle"):
        assert case.last_output_ms is not None and case.idle
    if isinstance(verdict, Wait):
        assert case.now_ms < verdict.until_ms <= case.deadline_ms


def test_tty_write_verdict_is_its_table_exhaustively() -> None:
    cases = grid()
    assert len(cases) > 1_000
    for case in cases:
        check(case)


@given(facts())
def test_tty_write_verdict_is_its_table(case: WriteFacts) -> None:
    check(case)


@given(facts())
def test_tty_write_verdict_answers_by_the_budget_at_the_latest(case: WriteFacts) -> None:
    """Asked again at each wait's time, with nothing new, the write answers, at the budget or sooner."""
    asks, start = 0, case.now_ms
    verdict = write_verdict(case)
    while isinstance(verdict, Wait):
        asks += 1
        assert asks <= 30_000
        case = WriteFacts(verdict.until_ms, case.written_ms, case.last_output_ms, case.idle, False, case.deadline_ms)
        verdict = write_verdict(case)
    assert case.now_ms <= max(case.deadline_ms, start)
    if verdict.reason == "quiet":
        since = case.written_ms if case.last_output_ms is None else case.last_output_ms
        assert case.now_ms == max(since + QUIET_MS, case.now_ms) and case.now_ms - since >= QUIET_MS


def test_tty_signal_table_exhaustively() -> None:
    assert list(SIGNALS) == ["HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "WINCH"]
    for name in SIGNALS:
        for spelled in (name, name.lower(), f"SIG{name}", f"sig{name.lower()}", f" {name} "):
            assert signal_named(spelled) == name
    for refused in ("STOP", "SIGSTOP", "CONT", "SEGV", "9", "", "SIG", "INTERRUPT", "SIGSIGINT"):
        assert signal_named(refused) is None


@given(st.text(max_size=12))
def test_tty_signal_named_takes_only_the_table(text: str) -> None:
    named = signal_named(text)
    assert named is None or (named in SIGNALS and text.strip().upper().removeprefix("SIG") == named)


def test_tty_size_limits_exhaustively() -> None:
    for cols, rows in itertools.product(range(-1, MAX_COLS + 3), (MIN_SIZE - 1, MIN_SIZE, 40, MAX_ROWS, MAX_ROWS + 1)):
        problem = size_problem(cols, rows)
        assert (problem is None) == (MIN_SIZE <= cols <= MAX_COLS and MIN_SIZE <= rows <= MAX_ROWS)
        if problem is not None:
            assert problem.startswith("cols" if not MIN_SIZE <= cols <= MAX_COLS else "rows")


def test_tty_view_is_the_screen_exactly_on_the_alternate_screen() -> None:
    assert view_for(True) == "screen"
    assert view_for(False) == "scrollback"
