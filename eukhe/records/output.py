"""The bounded-output record: the window every tool call, job and cell answers with (S2 "Limits" 2, 4).

Invariant: bytes_kept + bytes_dropped = every byte written. `text` is the window as UTF-8 (invalid bytes replaced);
`text_base64` carries the exact bytes when they are not UTF-8. `artifact` names the file holding the full output
(past the limits), `artifact_error` why it could not be written; `artifact_bytes_dropped` counts the bytes its cap
(`artifact_max_bytes`) left out of it (0: it holds every byte; else its head and tail, a marker line between).
"""

from __future__ import annotations

from eukhe.records.base import Record


class OutputWindow(Record):
    """A bounded output: its window, the counts of what was kept and dropped, the notice and the artifact."""

    text: str
    bytes_kept: int
    bytes_dropped: int
    lines_kept: int
    lines_dropped: int
    notice: str | None
    artifact: str | None
    artifact_error: str | None = None
    text_base64: str | None = None
    artifact_bytes_dropped: int = 0
