"""Sequence diagrams as SVG from a small text format (docs/architecture.diagram -> docs/architecture.svg).

The format, one statement a line (`#` starts a comment; ` | ` breaks a text into lines):

    title: TEXT                      the caption above the diagram
    lane ID: NAME | DETAIL           a participant (a process), left to right in the order given
    ID -> ID: TEXT                   a request from one lane to another (solid arrow)
    ID --> ID: TEXT                  an answer (dashed arrow)
    note ID: TEXT                    a note on a lane
    section: TEXT                    a rule across every lane, with its text on the left

Every item has a row of its own and lanes are spaced so that each arrow's text fits between its two lanes, so no
two texts overlap (`Layout.texts` lists their boxes; tests/unit/test_architecture_diagram.py checks them). The
output depends only on the source: text widths are estimated from a monospace font, numbers are integers.
`python -m tools.diagram` regenerates every docs/*.diagram; `--check` exits 1 when an SVG is out of date.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

DOCS = Path(__file__).resolve().parents[1] / "docs"
REGENERATE = "python3 -m uv run python -m tools.diagram"

FONT_PX = 13
CHAR_PX = 8  # a monospace glyph at 13 px is 7.8 px wide (0.6 em): rounding up keeps the boxes around the text
LINE_PX = 18
PAD_PX = 8
MARGIN_PX = 20
LANE_GAP_PX = 32  # at least this much between two lanes' header boxes
ARROW_ROOM_PX = 12  # room for the arrow head and a stretch of line beside the text, on each side
ROW_GAP_PX = 14


class DiagramError(ValueError):
    """A line of the source that is not a statement of the format; names the line."""

    def __init__(self, line_no: int, message: str) -> None:
        super().__init__(f"line {line_no}: {message}")
        self.line_no = line_no


@dataclass(frozen=True, slots=True)
class Lane:
    """A participant: its id in the source, and its header's lines."""

    id: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Message:
    """An arrow from one lane to another, with its text above it; `answer` draws it dashed."""

    source: str
    target: str
    lines: tuple[str, ...]
    answer: bool


@dataclass(frozen=True, slots=True)
class Note:
    """A boxed text on a lane."""

    lane: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Section:
    """A rule across every lane."""

    lines: tuple[str, ...]


Item = Message | Note | Section


@dataclass(frozen=True, slots=True)
class Diagram:
    """A parsed source: its title, lanes and items, in order."""

    title: str
    lanes: tuple[Lane, ...]
    items: tuple[Item, ...]


STATEMENT = re.compile(r"^(?P<head>[^:]*?)\s*:\s*(?P<text>.*)$")
ARROW = re.compile(r"^(?P<source>[A-Za-z_][\w-]*)\s*(?P<arrow>-->|->)\s*(?P<target>[A-Za-z_][\w-]*)$")
KEYWORD = re.compile(r"^(?P<word>lane|note)\s+(?P<id>[A-Za-z_][\w-]*)$")


def split_lines(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(" | "))


def parse(source: str) -> Diagram:
    """The diagram a source describes; DiagramError naming the first line that is not a statement."""
    title = ""
    lanes: list[Lane] = []
    items: list[Item] = []
    for line_no, raw in enumerate(source.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        statement = STATEMENT.match(line)
        if statement is None or not statement.group("text"):
            raise DiagramError(line_no, f"expected `HEAD: TEXT`, got {line!r}")
        head, text = statement.group("head"), statement.group("text")
        lines = split_lines(text)
        known = {lane.id for lane in lanes}
        if head == "title":
            title = text
        elif head == "section":
            items.append(Section(lines))
        elif (arrow := ARROW.match(head)) is not None:
            source_id, target_id = arrow.group("source"), arrow.group("target")
            for lane_id in (source_id, target_id):
                if lane_id not in known:
                    raise DiagramError(line_no, f"unknown lane {lane_id!r} (declare it with `lane {lane_id}: ...`)")
            if source_id == target_id:
                raise DiagramError(line_no, f"an arrow from {source_id!r} to itself: use a note")
            items.append(Message(source_id, target_id, lines, arrow.group("arrow") == "-->"))
        elif (keyword := KEYWORD.match(head)) is not None:
            lane_id = keyword.group("id")
            if keyword.group("word") == "lane":
                if lane_id in known:
                    raise DiagramError(line_no, f"lane {lane_id!r} is declared twice")
                if items:
                    raise DiagramError(line_no, "lanes come before the first arrow, note or section")
                lanes.append(Lane(lane_id, lines))
            elif lane_id not in known:
                raise DiagramError(line_no, f"unknown lane {lane_id!r} (declare it with `lane {lane_id}: ...`)")
            else:
                items.append(Note(lane_id, lines))
        else:
            raise DiagramError(line_no, f"unknown statement {head!r}")
    if not lanes:
        raise DiagramError(0, "a diagram needs at least one lane")
    return Diagram(title, tuple(lanes), tuple(items))


def text_width(lines: tuple[str, ...]) -> int:
    """The width of a block of lines, rounded up to an even number of pixels (so halves stay integers)."""
    width = max(len(line) for line in lines) * CHAR_PX
    return width + width % 2


@dataclass(frozen=True, slots=True)
class TextBox:
    """Where a block of text is drawn: its box (left, top, width, height) and its lines."""

    x: int
    y: int
    width: int
    height: int
    lines: tuple[str, ...]
    bold: bool = False
    ground: bool = True  # drawn on an opaque ground (a header's text has its header's box instead)

    def overlaps(self, other: TextBox) -> bool:
        return (
            self.x < other.x + other.width
            and other.x < self.x + self.width
            and self.y < other.y + other.height
            and other.y < self.y + self.height
        )


@dataclass(slots=True)
class Layout:
    """Everything the SVG draws, in pixels."""

    width: int = 0
    height: int = 0
    title: TextBox | None = None
    headers: list[tuple[int, int, int, int]] = field(default_factory=list)  # boxes: x, y, width, height
    lifelines: list[tuple[int, int, int]] = field(default_factory=list)  # x, top, bottom
    arrows: list[tuple[int, int, int, bool]] = field(default_factory=list)  # from x, to x, y, dashed
    notes: list[tuple[int, int, int, int]] = field(default_factory=list)
    rules: list[int] = field(default_factory=list)  # y of each section's rule
    texts: list[TextBox] = field(default_factory=list)


def lane_centres(diagram: Diagram) -> list[int]:
    """Each lane's x: wide enough apart for the headers, and for every arrow's text between its two lanes."""
    index = {lane.id: i for i, lane in enumerate(diagram.lanes)}
    halves = [(text_width(lane.lines) + 2 * PAD_PX) // 2 for lane in diagram.lanes]
    gaps = [halves[i] + halves[i + 1] + LANE_GAP_PX for i in range(len(halves) - 1)]
    spans: list[tuple[int, int, int]] = []
    for item in diagram.items:
        if isinstance(item, Message):
            low, high = sorted((index[item.source], index[item.target]))
            spans.append((high - low, low, text_width(item.lines) + 2 * PAD_PX + 2 * ARROW_ROOM_PX))
    for length, low, need in sorted(spans):  # shortest spans first: a long arrow's room spreads over settled gaps
        high = low + length
        short = need - sum(gaps[low:high])
        if short > 0:
            share, rest = divmod(short, high - low)
            for i in range(low, high):
                gaps[i] += share + (1 if i - low < rest else 0)
    centres = [0]
    for gap in gaps:
        centres.append(centres[-1] + gap)
    return centres


def layout(diagram: Diagram) -> Layout:
    """Place every header, lifeline, arrow, note, rule and text of the diagram."""
    result = Layout()
    centres = lane_centres(diagram)
    index = {lane.id: i for i, lane in enumerate(diagram.lanes)}
    # Every box centred on a lane must stay inside the picture: shift the lanes right as far as the widest needs.
    lefts = [centres[i] - (text_width(lane.lines) + 2 * PAD_PX) // 2 for i, lane in enumerate(diagram.lanes)]
    rights = [centres[i] + (text_width(lane.lines) + 2 * PAD_PX) // 2 for i, lane in enumerate(diagram.lanes)]
    for item in diagram.items:
        if isinstance(item, Note):
            half = (text_width(item.lines) + 2 * PAD_PX) // 2
            lefts.append(centres[index[item.lane]] - half)
            rights.append(centres[index[item.lane]] + half)
        elif isinstance(item, Section):
            lefts.append(0)
            rights.append(text_width(item.lines) + 2 * PAD_PX)
    shift = MARGIN_PX - min(lefts)
    centres = [centre + shift for centre in centres]
    right_edge = max(rights) + shift
    if diagram.title:
        title_width = len(diagram.title) * (CHAR_PX + 1)
        result.title = TextBox(MARGIN_PX, MARGIN_PX, title_width, LINE_PX + 4, (diagram.title,), bold=True)
        right_edge = max(right_edge, MARGIN_PX + title_width)
    y = MARGIN_PX + (LINE_PX + 4 + ROW_GAP_PX if diagram.title else 0)

    header_height = max(len(lane.lines) for lane in diagram.lanes) * LINE_PX + 2 * PAD_PX
    for centre, lane in zip(centres, diagram.lanes, strict=True):
        width = text_width(lane.lines) + 2 * PAD_PX
        result.headers.append((centre - width // 2, y, width, header_height))
        result.texts.append(
            TextBox(
                centre - width // 2 + PAD_PX,
                y + PAD_PX,
                width - 2 * PAD_PX,
                len(lane.lines) * LINE_PX,
                lane.lines,
                bold=True,
                ground=False,
            )
        )
    top = y + header_height
    y = top + ROW_GAP_PX

    for item in diagram.items:
        height = len(item.lines) * LINE_PX
        width = text_width(item.lines)
        if isinstance(item, Message):
            start, end = centres[index[item.source]], centres[index[item.target]]
            middle = (start + end) // 2
            result.texts.append(TextBox(middle - width // 2, y, width, height, item.lines))
            arrow_y = y + height + 6
            result.arrows.append((start, end, arrow_y, item.answer))
            y = arrow_y + ROW_GAP_PX
        elif isinstance(item, Note):
            centre = centres[index[item.lane]]
            box = (centre - width // 2 - PAD_PX, y, width + 2 * PAD_PX, height + 2 * PAD_PX)
            result.notes.append(box)
            result.texts.append(TextBox(centre - width // 2, y + PAD_PX, width, height, item.lines, ground=False))
            y += box[3] + ROW_GAP_PX
        else:
            rule_y = y + height // 2 + PAD_PX
            result.rules.append(rule_y)
            result.texts.append(TextBox(MARGIN_PX + 2, y + PAD_PX, width, height, item.lines, bold=True))
            y += height + 2 * PAD_PX + ROW_GAP_PX
    result.lifelines = [(centre, top, y) for centre in centres]
    result.width = right_edge + MARGIN_PX
    result.height = y + MARGIN_PX
    return result


def _text(box: TextBox) -> list[str]:
    """A text block, left-aligned in its box, on an opaque ground so that lines behind it do not cross it."""
    weight = ' font-weight="bold"' if box.bold else ""
    out = []
    if box.ground:
        out.append(f'<rect x="{box.x - 2}" y="{box.y}" width="{box.width + 4}" height="{box.height}" class="ground"/>')
    for n, line in enumerate(box.lines):
        baseline = box.y + n * LINE_PX + FONT_PX + 1
        out.append(f'<text x="{box.x}" y="{baseline}"{weight} xml:space="preserve">{escape(line)}</text>')
    return out


def render(diagram: Diagram) -> str:
    """The diagram as a standalone SVG document."""
    place = layout(diagram)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{place.width}" height="{place.height}" '
        f'viewBox="0 0 {place.width} {place.height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
        f'font-size="{FONT_PX}">',
        f"<title>{escape(diagram.title)}</title>",
        "<style>.ground{fill:#ffffff}.header{fill:#e8eef7;stroke:#34527a}.note{fill:#fff8dc;stroke:#b59a3c}"
        ".life{stroke:#8a8a8a;stroke-dasharray:4 4}.rule{stroke:#34527a;stroke-dasharray:8 4}"
        ".call{stroke:#1f1f1f;stroke-width:1.5}.answer{stroke:#1f1f1f;stroke-width:1.5;stroke-dasharray:6 4}"
        "text{fill:#1f1f1f}</style>",
        f'<rect x="0" y="0" width="{place.width}" height="{place.height}" class="ground"/>',
    ]
    out.extend(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{bottom}" class="life"/>' for x, top, bottom in place.lifelines)
    out.extend(
        f'<line x1="{MARGIN_PX}" y1="{y}" x2="{place.width - MARGIN_PX}" y2="{y}" class="rule"/>' for y in place.rules
    )
    for x, y, width, height in place.headers:
        out.append(f'<rect x="{x}" y="{y}" width="{width}" height="{height}" rx="4" class="header"/>')
    for x, y, width, height in place.notes:
        out.append(f'<rect x="{x}" y="{y}" width="{width}" height="{height}" class="note"/>')
    for start, end, y, dashed in place.arrows:
        step = 8 if end > start else -8
        out.append(f'<line x1="{start}" y1="{y}" x2="{end - step}" y2="{y}" class="{"answer" if dashed else "call"}"/>')
        out.append(f'<polygon points="{end},{y} {end - step},{y - 4} {end - step},{y + 4}" fill="#1f1f1f"/>')
    if place.title is not None:
        out.extend(_text(place.title))
    for box in place.texts:
        out.extend(_text(box))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def sources(docs: Path = DOCS) -> list[Path]:
    """Every diagram source under docs/."""
    return sorted(docs.glob("*.diagram"))


def main(argv: list[str] | None = None) -> int:
    """Write each docs/*.diagram's SVG beside it, or with --check report the ones that are out of date."""
    parser = argparse.ArgumentParser(prog="python -m tools.diagram", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if an SVG is out of date")
    parser.add_argument("source", nargs="*", type=Path, help="diagram sources (default: docs/*.diagram)")
    options = parser.parse_args(argv)
    stale = 0
    for source in options.source or sources():
        target = source.with_suffix(".svg")
        try:
            fresh = render(parse(source.read_text()))
        except DiagramError as error:
            print(f"{source}: {error}", file=sys.stderr)
            return 1
        if target.exists() and target.read_text() == fresh:
            continue
        if options.check:
            print(f"{target} is out of date with {source}: run `{REGENERATE}`", file=sys.stderr)
            stale += 1
        else:
            target.write_text(fresh)
            print(f"wrote {target}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
