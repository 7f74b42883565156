"""What a tool result holds besides its text: a cell's images as MCP `image` content, and a `resource_link` to the
artifact of an output that was cut.

The images are read from their artifacts (the answer names them; the journal keeps no image bytes), only those the
answer shows, each at most the bound's size per image (eukhe.core.pictures). An image that cannot be read now (an
artifact collection removed it) is one line of text instead. The link's URI is the artifact's `file://` URI; the
server's `resources/read` serves it bounded and paged (eukhe.mcp.artifacts).
"""

from __future__ import annotations

import base64
import os
import stat

import mcp_types as types

from eukhe.core.pictures import MAX_IMAGE_BYTES
from eukhe.mcp.artifacts import artifact_uri
from eukhe.records.base import Record
from eukhe.records.displays import Display
from eukhe.records.output import OutputWindow

Block = types.TextContent | types.ImageContent | types.ResourceLink


def has_extra_content(answer: Record) -> bool:
    """Whether `extra_content` has anything to add (no file is read here: the common answer skips the thread)."""
    displays = getattr(answer, "displays", None)
    output = getattr(answer, "output", None)
    shown = isinstance(displays, list) and any(display.shown for display in displays)
    return shown or (isinstance(output, OutputWindow) and output.artifact is not None)


def extra_content(answer: Record) -> list[Block]:
    """The images an answer shows, then the link to its cut output's artifact (blocking file I/O: run off the loop)."""
    blocks: list[Block] = []
    displays = getattr(answer, "displays", None)
    if isinstance(displays, list):
        blocks += [image_block(number, display) for number, display in enumerate(displays, 1) if display.shown]
    output = getattr(answer, "output", None)
    if isinstance(output, OutputWindow) and output.artifact is not None:
        blocks.append(artifact_link(output))
    return blocks


def image_block(number: int, display: Display) -> types.ImageContent | types.TextContent:
    """One shown image as `image` content, or a line saying why it cannot be shown now."""
    if display.artifact is None:
        return types.TextContent(text=f"[image {number} could not be saved: {display.artifact_error}]")
    try:
        data = read_image(display.artifact)
    except OSError as error:
        return types.TextContent(text=f"[image {number} cannot be read from {display.artifact}: {error}]")
    return types.ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=display.mime_type)


def read_image(path: str) -> bytes:
    """An image artifact's bytes: a regular file (no symlink followed) of at most the size per image."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            raise OSError(f"{path} is not a regular file")
        if facts.st_size > MAX_IMAGE_BYTES:
            raise OSError(f"{path} is {facts.st_size} bytes, over the {MAX_IMAGE_BYTES} an image may have")
        return os.read(fd, MAX_IMAGE_BYTES + 1)[:MAX_IMAGE_BYTES]
    finally:
        os.close(fd)


def artifact_link(output: OutputWindow) -> types.ResourceLink:
    """The `resource_link` to a cut output's artifact: its name, size, and a description saying how it is read."""
    assert output.artifact is not None
    try:
        size: int | None = os.stat(output.artifact).st_size
    except OSError:
        size = None
    return types.ResourceLink(
        name=os.path.basename(output.artifact),
        uri=artifact_uri(output.artifact),
        description=(
            (
                "The full output the answer cut. "
                if not output.artifact_bytes_dropped
                else f"The head and the tail of the output the answer cut ({output.artifact_bytes_dropped} bytes "
                "between them left out by artifact_max_bytes, a marker line in their place). "
            )
            + "resources/read gives it a page at a time (?line=N reads from line N); "
            "the read tool reads it too, from any line (offset)."
        ),
        mime_type="text/plain",
        size=size,
    )
