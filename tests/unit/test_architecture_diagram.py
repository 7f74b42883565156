"""docs/architecture.svg is what tools.diagram makes of docs/architecture.diagram, and what it makes is readable:
no two texts overlap, every text is inside the picture, and an arrow's text lies between its two lanes."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tools import diagram

DOCS = Path(__file__).resolve().parents[2] / "docs"
SOURCE = DOCS / "architecture.diagram"
SVG = DOCS / "architecture.svg"


def test_the_committed_svg_is_generated_from_its_source() -> None:
    fresh = diagram.render(diagram.parse(SOURCE.read_text()))
    assert SVG.read_text() == fresh, f"docs/architecture.svg is out of date with its source: run `{diagram.REGENERATE}`"
    assert diagram.main(["--check"]) == 0


def test_the_architecture_page_shows_the_svg() -> None:
    assert "](architecture.svg)" in (DOCS / "architecture.md").read_text()


def test_a_hand_edited_svg_is_drift(tmp_path: Path) -> None:
    source = tmp_path / "a.diagram"
    source.write_text(SOURCE.read_text())
    assert diagram.main([str(source)]) == 0
    svg = tmp_path / "a.svg"
    assert diagram.main(["--check", str(source)]) == 0
    svg.write_text(svg.read_text().replace("CallToolResult", "CallResult"))
    assert diagram.main(["--check", str(source)]) == 1
    assert diagram.main([str(source)]) == 0
    assert svg.read_text() == SVG.read_text()


def test_a_changed_source_changes_the_svg() -> None:
    text = SOURCE.read_text()
    assert diagram.render(diagram.parse(text)) != diagram.render(diagram.parse(text.replace("CallToolResult", "X")))


def test_no_two_texts_overlap_and_every_text_is_inside_the_picture() -> None:
    place = diagram.layout(diagram.parse(SOURCE.read_text()))
    boxes = [*place.texts, *([place.title] if place.title else [])]
    for one, other in itertools.combinations(boxes, 2):
        assert not one.overlaps(other), (one.lines, other.lines)
    for box in boxes:
        assert box.x >= 0 and box.x + box.width <= place.width, box.lines
        assert box.y >= 0 and box.y + box.height <= place.height, box.lines


def test_every_arrow_text_lies_between_its_lanes() -> None:
    parsed = diagram.parse(SOURCE.read_text())
    place = diagram.layout(parsed)
    messages = [item for item in parsed.items if isinstance(item, diagram.Message)]
    labels = [box for box in place.texts if any(box.lines == m.lines for m in messages)]
    assert len(place.arrows) == len(messages) == len(labels)
    for (start, end, y, _), label in zip(place.arrows, labels, strict=True):
        assert min(start, end) < label.x and label.x + label.width < max(start, end), label.lines
        assert label.y + label.height < y, label.lines


def test_the_text_is_escaped() -> None:
    svg = diagram.render(diagram.parse('lane a: <a> & "b"\nlane b: b\na -> b: x < y'))
    assert "&lt;a&gt; &amp;" in svg
    assert "x &lt; y" in svg


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("lane a: A\nb -> a: x", "line 2: unknown lane 'b'"),
        ("lane a: A\nlane a: B", "line 2: lane 'a' is declared twice"),
        ("lane a: A\nlane b: B\na -> a: x", "line 3: an arrow from 'a' to itself"),
        ("lane a: A\nnote a: x\nlane b: B", "line 3: lanes come before"),
        ("lane a: A\nbox a: x", "line 2: unknown statement 'box a'"),
        ("lane a: A\na -> b", "line 2: expected `HEAD: TEXT`"),
        ("# nothing", "at least one lane"),
    ],
)
def test_a_source_that_is_not_the_format_is_refused_naming_the_line(source: str, message: str) -> None:
    with pytest.raises(diagram.DiagramError, match=message):
        diagram.parse(source)
