"""Whether a kernel's `fs.read` is answered by reference: the text's place in the shared file, not the text.

A kernel sees the session's files through its transport's mounts (the Local transport: the host's own disk), so a
large text need not cross the kernel's pipe: the host names the bytes (file, start, length, CRC-32) and the kernel
reads them itself. The host still reads the file and bounds the answer; only the unbounded text of a range is sent
by reference, since then the text is exactly those bytes. Pure: the shell brings the facts.
"""

from __future__ import annotations

BY_REFERENCE_MIN_BYTES = 64 * 1024
"""A text shorter than this crosses the pipe: reading it there costs less than a second file read and its sum."""


def answers_by_reference(asked: bool, span_bytes: int, bytes_kept: int, bytes_dropped: int, lines_dropped: int) -> bool:
    """True when the kernel `asked` for it, nothing of the range was dropped (so the kept text is the `span_bytes`
    bytes of the range, all of them), and the text is at least `BY_REFERENCE_MIN_BYTES` long."""
    whole = bytes_dropped == 0 and lines_dropped == 0 and bytes_kept == span_bytes
    return asked and whole and span_bytes >= BY_REFERENCE_MIN_BYTES
