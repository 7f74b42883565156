"""What the host's answers look like in a cell: `Answer` (a dict you can also read by attribute) and `FsError`."""

from __future__ import annotations

from typing import Any


class Answer(dict[str, Any]):
    """A host answer: its keys as a dict, and as attributes (`answer.output.text`). `str()` of an answer with a
    bounded output is its text, followed by the truncation notice when something was cut."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return Answer(value) if isinstance(value, dict) else value

    @property
    def text(self) -> str:
        """The bounded output's text (empty when the answer has none)."""
        output = self.get("output")
        return str(output.get("text", "")) if isinstance(output, dict) else ""

    def __str__(self) -> str:
        output = self.get("output")
        if not isinstance(output, dict):
            return dict.__repr__(self)
        notice = output.get("notice")
        return self.text + (f"\n{notice}" if notice else "")


class FsError(Exception):
    """A file tool refused: `reason` (`outside`, `not_found`, `not_a_file`, `patch_failed`, ...), the `path` as the
    cell gave it, and the protocol `version` (`transport@1`)."""

    def __init__(self, reason: str, path: str | None, message: str, version: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path
        self.message = message
        self.version = version

    def __repr__(self) -> str:
        return f"FsError({self.reason!r}, {self.path!r}, {self.message!r})"
