"""How much of a tool result an MCP client hands its model whole, and the window eukhe cuts to for it.

A client that gets a result larger than its own limit cuts it again (Claude Code saves it to a file and shows a
preview; Codex cuts out its middle), and then eukhe's notice no longer says what the model read. So eukhe's text
must fit the client: the room of a known client (by the `clientInfo.name` of its `initialize`) comes from
KNOWN_CLIENTS, an unknown client gets DEFAULT_ROOM, and the user's `mcp_result_max_bytes` overrides both.

A room is in UTF-8 bytes, which is never fewer than a text's characters (so a limit in characters holds too), and
in lines. The window eukhe keeps of an output is the room less FRAME_BYTES and FRAME_LINES, the text around it (the
`[exit N]` line, a detach hint, a read's range line, the notice).
"""

from __future__ import annotations

from dataclasses import dataclass

from eukhe.core.bound import DEFAULT_MAX_LINES, Keep, OutputLimits


@dataclass(frozen=True, slots=True)
class ResultRoom:
    """At most `max_bytes` bytes (UTF-8) and `max_lines` lines of one tool result reach the model whole."""

    max_bytes: int
    max_lines: int


FRAME_BYTES = 1024
"""Bytes of a result's text that are not its output window: the exit line, hints, the notice, a read's range."""
FRAME_LINES = 8
"""Lines of a result's text that are not its output window."""
MIN_ROOM_BYTES = 4096
"""The smallest room `mcp_result_max_bytes` may give: a window of a few KiB, and the frame."""

KNOWN_CLIENTS: dict[str, ResultRoom] = {
    "claude-code": ResultRoom(max_bytes=49_152, max_lines=DEFAULT_MAX_LINES),
    "codex-mcp-client": ResultRoom(max_bytes=10_000, max_lines=DEFAULT_MAX_LINES),
}
"""The known clients by their `clientInfo.name`, each with the room it leaves a tool result, measured with the
real clients (`python -m tests.clients.measure`; docs/mcp.md, "Results"): Claude Code 2.1.332 hands its model a
text of up to 50,000 UTF-16 units whole (never more units than UTF-8 bytes), and saves a longer one to a file with a
2 KB preview; Codex 0.171.0 cuts the middle out of a result past about 12,000 bytes for a model it does not know
(10,000 bytes of budget, 1.2 times, less its header), more for its own models (40,000 bytes in code mode), which
eukhe cannot tell apart: the smallest holds."""

DEFAULT_ROOM = ResultRoom(max_bytes=51_200 + FRAME_BYTES, max_lines=DEFAULT_MAX_LINES + FRAME_LINES)
"""An unknown client's room: eukhe's own default window (50 KiB, 2000 lines) and its frame."""


def room_for(client: str | None, setting: int | None) -> ResultRoom:
    """The room of one client's results: the user's `mcp_result_max_bytes` when set, else the known client's, else
    DEFAULT_ROOM."""
    known = KNOWN_CLIENTS.get(client or "", DEFAULT_ROOM)
    return known if setting is None else ResultRoom(max_bytes=setting, max_lines=known.max_lines)


def output_limits(room: ResultRoom, keep: Keep) -> OutputLimits:
    """The window of an output in a result of `room`: the room less the frame, from the `keep` end."""
    return OutputLimits(max(1, room.max_bytes - FRAME_BYTES), max(1, room.max_lines - FRAME_LINES), keep)


def fits(size_bytes: int, lines: int, room: ResultRoom) -> bool:
    """Whether a text of `size_bytes` bytes and `lines` lines reaches the model whole."""
    return size_bytes <= room.max_bytes and lines <= room.max_lines


def shrunk(limits: OutputLimits, text_bytes: int, room: ResultRoom) -> OutputLimits:
    """Smaller limits for a window whose text came out at `text_bytes` over the room (rendering made it larger than
    its bytes: escapes shown, invalid bytes replaced): scaled by how far over, with a tenth to spare."""
    scaled = limits.max_bytes * room.max_bytes // max(text_bytes, 1) * 9 // 10
    return OutputLimits(max(1, min(scaled, limits.max_bytes - 1)), limits.max_lines, limits.keep)
