"""The host's side of a cell's pictures and of an artifact's pages: images saved and bounded (`CellDisplays`), HTML as
text, the lines that name the images, and `resources/read`'s pages of an artifact (`eukhe.mcp.artifacts`)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from eukhe.calls.texts import answer_text
from eukhe.core.bound import Keep, OutputLimits
from eukhe.core.pictures import PNG_SIGNATURE, Limits
from eukhe.kernel.displays import CellDisplays, display_text, html_text, image_of
from eukhe.mcp.artifacts import (
    ArtifactRefusedError,
    artifact_uri,
    check_artifact,
    page_text,
    parse_artifact_uri,
    read_page,
)
from eukhe.records.jobs import Settled
from eukhe.records.output import OutputWindow

PNG = PNG_SIGNATURE + b"\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03rest"


def bundle(data: bytes, mime: str = "image/png") -> dict[str, str]:
    return {"text/plain": "<picture>", mime: base64.b64encode(data).decode()}


def test_images_are_saved_private_named_and_bounded(tmp_path: Path) -> None:
    displays = CellDisplays("c7", tmp_path / "artifacts", Limits(max_image_bytes=len(PNG), max_shown=1, max_saved=3))
    displays.add({"text/plain": "no image"})
    displays.add(bundle(PNG))
    displays.add(bundle(PNG + b"x"))  # over the size
    displays.add(bundle(PNG))  # past the count shown
    displays.add(bundle(PNG))  # past the count saved
    assert [(d.shown, d.withheld, d.width, d.height) for d in displays.records] == [
        (True, None, 2, 3),
        (False, "too_large", 2, 3),
        (False, "over_count", 2, 3),
    ]
    for number, display in enumerate(displays.records, 1):
        assert display.artifact is not None
        path = Path(display.artifact)
        assert path.name.startswith(f"cell-c7-image-{number}-") and path.suffix == ".png"
        assert path.read_bytes()[: len(PNG)] == PNG
        assert os.stat(path).st_mode & 0o777 == 0o600
    assert displays.tally.dropped == 1
    notice = displays.notice()
    assert notice is not None and "1 image over" in notice and "1 image past the 3 an answer saves" in notice


def test_an_image_without_an_artifacts_dir_is_named_with_why_and_not_shown() -> None:
    displays = CellDisplays("c1", None)
    displays.add(bundle(PNG))
    (display,) = displays.records
    assert (display.artifact, display.shown) == (None, False)
    assert display.artifact_error


def test_a_bundles_image_is_png_then_jpeg_then_svg_and_broken_base64_is_none() -> None:
    assert image_of({"image/jpeg": base64.b64encode(b"j").decode(), "image/png": base64.b64encode(b"p").decode()}) == (
        "image/png",
        "png",
        b"p",
    )
    assert image_of({"image/svg+xml": "<svg/>"}) == ("image/svg+xml", "svg", b"<svg/>")
    assert image_of({"image/png": "not base64!"}) is None
    assert image_of({"text/plain": "x"}) is None


def test_html_becomes_readable_text_and_markdown_comes_first() -> None:
    page = (
        "<html><head><title>t</title><style>p{}</style></head><body><h1>Title</h1><p>one&nbsp;&amp; two</p>"
        "<ul><li>a</li><li>b</li></ul><table><tr><th>k</th><th>v</th></tr><tr><td>x</td><td>1</td></tr></table>"
        "<script>alert(1)</script></body></html>"
    )
    assert html_text(page) == "Title\none & two\n- a\n- b\nk | v\nx | 1"
    assert display_text({"text/markdown": "**m**", "text/html": "<b>h</b>"}) == "**m**"
    assert display_text({"text/html": "<b>h</b>"}) == "h"
    assert display_text({"text/plain": "p"}) is None


def test_html_text_is_bounded() -> None:
    text = html_text("<p>" + "word " * 100_000 + "</p>" * 10 + "x" * (2 * 1024 * 1024))
    assert len(text) < 70 * 1024
    assert text.endswith("[HTML cut: the display is longer than its text shows]")


def test_a_cell_answer_names_each_image_and_the_notice() -> None:
    displays = CellDisplays("c1", None, Limits(max_image_bytes=1))
    displays.add(bundle(PNG))
    window = OutputWindow(
        text="", bytes_kept=0, bytes_dropped=0, lines_kept=0, lines_dropped=0, notice=None, artifact=None
    )
    answer = Settled(
        job=None,
        kind="cell",
        command="x",
        exit_code=0,
        killed=False,
        output=window,
        outcome="ok",
        displays=list(displays.records),
        displays_notice=displays.notice(),
    )
    lines = answer_text(answer).splitlines()
    assert lines[0].startswith(f"[image 1: image/png 2x3, {len(PNG)} bytes, not shown (too large); not saved: ")
    assert lines[1].startswith("[not shown: 1 image over 1 bytes each")


SMALL = OutputLimits(10, 3, Keep.HEAD)


def artifact(tmp_path: Path, data: bytes, session: str = "s1") -> Path:
    directory = tmp_path / session / "artifacts"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "job-1.log"
    path.write_bytes(data)
    return path


def test_an_artifact_reads_a_bounded_page_at_a_time_to_its_end(tmp_path: Path) -> None:
    path = artifact(tmp_path, b"".join(b"%d\n" % n for n in range(1, 21)))
    pages: list[str] = []
    line: int | None = 1
    while line is not None:
        page = read_page(path, line, SMALL)
        assert len(page.text.encode()) <= SMALL.max_bytes and page.text.count("\n") <= SMALL.max_lines
        pages.append(page.text)
        line = page.next_line
    assert "".join(pages) == path.read_text()  # every line once, in order
    last = read_page(path, 19, SMALL)
    assert page_text(path, last).endswith(
        f"[{path}: lines 19-20 ({path.stat().st_size} bytes in all); the end of the artifact]"
    )
    first = page_text(path, read_page(path, 1, SMALL))
    assert first.startswith("1\n2\n3\n[")
    assert f'read on with the read tool, {{"path": "{path}", "offset": 4}}' in first
    assert artifact_uri(str(path), 4) in first
    past = read_page(path, 21, SMALL)
    assert page_text(path, past).endswith("no line 21: the artifact ends before it (51 bytes in all)]")


def test_a_line_longer_than_a_page_is_cut_and_the_next_page_starts_at_the_next_line(tmp_path: Path) -> None:
    path = artifact(tmp_path, "é".encode() * 40 + b"\nnext\n")
    page = read_page(path, 1, SMALL)
    assert page.text == "é" * 5  # cut at a character boundary, within the bytes
    assert (page.last, page.next_line) == (1, 2)
    assert read_page(path, 2, SMALL).text == "next\n"


def test_only_the_sessions_artifacts_are_served(tmp_path: Path) -> None:
    path = artifact(tmp_path, b"x\n")
    assert check_artifact(str(path), "s1") == path
    for other, session in ((str(path), "s2"), ("/etc/passwd", "s1"), ("relative/s1/artifacts/x", "s1")):
        with pytest.raises(ArtifactRefusedError):
            check_artifact(other, session)
    assert parse_artifact_uri(artifact_uri(str(path), 7)) == (str(path), 7)
    assert parse_artifact_uri(artifact_uri("/a b/c%d")) == ("/a b/c%d", 1)
    assert parse_artifact_uri("eukhe://session/jobs") is None
    link = tmp_path / "s1" / "artifacts" / "link.log"
    link.symlink_to(path)
    with pytest.raises(OSError):
        read_page(link, 1)
    with pytest.raises(ArtifactRefusedError):
        read_page(path, 0)


def test_a_300_mb_artifact_is_never_read_whole(tmp_path: Path) -> None:
    path = artifact(tmp_path, b"head\n" * 3)
    with path.open("r+b") as file:
        file.truncate(300 * 1024 * 1024)  # sparse: 300 MB that cost no disk
    page = read_page(path, 1)
    assert page.text.startswith("head\nhead\nhead\n")
    assert len(page.text.encode()) <= 50 * 1024
    assert (page.next_line, page.size) == (4, 300 * 1024 * 1024)
    text = page_text(path, page)
    assert f"({300 * 1024 * 1024} bytes in all); read on with the read tool" in text
