"""A tool result's blocks besides its text: `has_extra_content` (which lets the common answer skip the thread that
reads images and artifacts) says yes exactly when `extra_content` adds a block."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from eukhe.mcp.content import extra_content, has_extra_content
from eukhe.records.displays import Display
from eukhe.records.jobs import Settled
from eukhe.records.output import OutputWindow


def _answer(artifact: str | None, shown: list[bool], where: Path) -> Settled:
    output = OutputWindow(
        text="", bytes_kept=0, bytes_dropped=0, lines_kept=0, lines_dropped=0, notice=None, artifact=artifact
    )
    displays = [
        Display(mime_type="image/png", bytes=3, width=1, height=1, artifact=str(where / f"{i}.png"), shown=flag)
        for i, flag in enumerate(shown)
    ]
    return Settled(job="j", kind="ipython", command="1", exit_code=0, killed=False, output=output, displays=displays)


@given(artifact=st.booleans(), shown=st.lists(st.booleans(), max_size=3))
def test_has_extra_content_is_true_exactly_when_extra_content_adds_a_block(artifact: bool, shown: list[bool]) -> None:
    where = Path("/nonexistent-eukhe-test")
    answer = _answer(str(where / "out.log") if artifact else None, shown, where)
    assert has_extra_content(answer) == bool(extra_content(answer))
