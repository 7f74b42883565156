"""A cell's rich displays on the host: each image saved as an artifact and named by a `Display` record, bounded by
`eukhe.core.pictures`; Markdown and HTML turned into the text of the cell's output.

A MIME bundle (a `display` frame, or a `result` frame's `data`) gives one image at most: PNG, else JPEG, else SVG.
Its file is `cell-<cell id>-image-<n>-<random>.<ext>` in the session's artifacts dir (mode 0600), beside the cell's
output artifacts, so an artifact collection treats it as any other. The text a display adds to the output is its
Markdown, else its HTML as readable text (bounded), else its repr.
"""

from __future__ import annotations

import base64
import binascii
import html.parser
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eukhe.core import pictures as core
from eukhe.private_fs import write_private_file
from eukhe.records.displays import Display, Withheld

IMAGE_TYPES = (("image/png", "png", True), ("image/jpeg", "jpg", True), ("image/svg+xml", "svg", False))
"""The image MIME types, in the order a bundle's image is chosen: the type, the artifact's suffix, and whether the
bundle carries it as base64 (SVG is text)."""

WITHHELD: dict[core.Verdict, Withheld] = {core.Verdict.TOO_LARGE: "too_large", core.Verdict.OVER_COUNT: "over_count"}
"""Why an image saved is not shown, as its record says."""
HTML_INPUT_CHARS = 1024 * 1024
"""Characters of HTML read for its text; the rest is counted in the line that says it was cut."""
HTML_TEXT_CHARS = 64 * 1024
"""Characters of text an HTML display gives at most (the output's own bound applies after)."""


DEFAULT_LIMITS = core.Limits()


class CellDisplays:
    """The images of one cell so far: their records, the tally the core's bound keeps, the files written."""

    def __init__(self, cell_id: str, artifact_dir: Path | None, limits: core.Limits = DEFAULT_LIMITS) -> None:
        self.cell_id = cell_id
        self.artifact_dir = artifact_dir
        self.limits = limits
        self.tally = core.Tally()
        self.records: list[Display] = []

    def add(self, bundle: Mapping[str, Any]) -> None:
        """One bundle's image, if it has one: admitted by the bound, saved, named."""
        found = image_of(bundle)
        if found is None:
            return
        mime, suffix, data = found
        self.tally, verdict = core.admit(self.tally, len(data), self.limits)
        if verdict is core.Verdict.DROP:
            return
        artifact, error = self._save(suffix, data)
        size = core.image_size(data)
        self.records.append(
            Display(
                mime_type=mime,
                bytes=len(data),
                width=None if size is None else size[0],
                height=None if size is None else size[1],
                artifact=artifact,
                shown=verdict is core.Verdict.SHOW and artifact is not None,
                withheld=WITHHELD.get(verdict),
                artifact_error=error,
            )
        )

    def notice(self) -> str | None:
        """The line that says which images are not shown (None: all are)."""
        return core.notice(self.tally, self.limits)

    def _save(self, suffix: str, data: bytes) -> tuple[str | None, str | None]:
        """Write the image's artifact: its path, or why it could not be written."""
        if self.artifact_dir is None:
            return None, "this kernel has no artifacts dir"
        number = len(self.records) + 1
        path = self.artifact_dir / f"cell-{self.cell_id}-image-{number}-{os.urandom(4).hex()}.{suffix}"
        try:
            write_private_file(path, data)
        except OSError as error:
            return None, f"cannot write the image in {self.artifact_dir}: {error.strerror or error}"
        return str(path), None


def image_of(bundle: Mapping[str, Any]) -> tuple[str, str, bytes] | None:
    """The bundle's image (MIME type, suffix, bytes), or None when it holds none (or only broken base64)."""
    for mime, suffix, is_base64 in IMAGE_TYPES:
        value = bundle.get(mime)
        if not isinstance(value, str) or not value:
            continue
        if not is_base64:
            return mime, suffix, value.encode("utf-8", "replace")
        try:
            return mime, suffix, base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
    return None


def display_text(bundle: Mapping[str, Any]) -> str | None:
    """The text a bundle shows a model: its Markdown, else its HTML as text, else None (then its repr shows)."""
    markdown = bundle.get("text/markdown")
    if isinstance(markdown, str):
        return markdown
    markup = bundle.get("text/html")
    if isinstance(markup, str):
        return html_text(markup)
    return None


def html_text(markup: str) -> str:
    """HTML as readable text: tags out, entities decoded, blocks and rows on lines of their own, table cells apart,
    scripts and styles dropped; at most HTML_TEXT_CHARS characters, with a line saying what was cut."""
    reader = _TextReader()
    reader.feed(markup[:HTML_INPUT_CHARS])
    reader.close()
    text = reader.text()
    cut = len(markup) - HTML_INPUT_CHARS
    if len(text) > HTML_TEXT_CHARS:
        text = text[:HTML_TEXT_CHARS]
        cut = max(cut, 1)
    if cut > 0:
        text = text.rstrip("\n") + "\n[HTML cut: the display is longer than its text shows]"
    return text


BLOCKS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
        "caption",
    ]
)
"""Tags that start a line of their own."""
CELLS = frozenset({"td", "th"})
HIDDEN = frozenset({"script", "style", "head", "title", "template"})


class _TextReader(html.parser.HTMLParser):
    """Collects the text of an HTML document (see `html_text`)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self._hidden = 0
        self._pre = 0
        self._row_started = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in HIDDEN:
            self._hidden += 1
        elif tag in CELLS:
            if self._row_started:
                self._parts.append(" | ")
            self._row_started = True
        elif tag in BLOCKS:
            self._parts.append("\n")
            self._row_started = False
            if tag == "li":
                self._parts.append("- ")
            if tag == "pre":
                self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in HIDDEN:
            self._hidden = max(self._hidden - 1, 0)
        elif tag in BLOCKS:
            self._parts.append("\n")
            if tag == "pre":
                self._pre = max(self._pre - 1, 0)

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        self._parts.append(data if self._pre else re.sub(r"\s+", " ", data))

    def text(self) -> str:
        lines = [line.strip() for line in "".join(self._parts).split("\n")]
        return "\n".join(line for line in lines if line)
