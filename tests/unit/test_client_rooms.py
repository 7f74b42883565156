"""What eukhe sends one MCP client: the room of a known client, the default for an unknown one, the user's setting
over both; and a result cut to its room keeps eukhe's text, notice and counts true (`eukhe.calls.runner.fitted`)."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

from eukhe.calls.catalog import CALL_TOOLS
from eukhe.calls.runner import fitted
from eukhe.core import clients
from eukhe.core.bound import Keep
from eukhe.output import save_artifact
from eukhe.records.jobs import Settled
from eukhe.records.output import OutputWindow


def test_a_known_client_gets_its_room_an_unknown_one_the_default_and_the_setting_wins() -> None:
    assert clients.room_for("codex-mcp-client", None) == clients.KNOWN_CLIENTS["codex-mcp-client"]
    assert clients.room_for("some-client", None) == clients.DEFAULT_ROOM
    assert clients.room_for(None, None) == clients.DEFAULT_ROOM
    assert clients.room_for("claude-code", 9000).max_bytes == 9000


def settled(text: bytes) -> Settled:
    window = OutputWindow(
        text=text.decode("utf-8", "replace"),
        bytes_kept=len(text),
        bytes_dropped=0,
        lines_kept=text.count(b"\n") + (not text.endswith(b"\n")),
        lines_dropped=0,
        notice=None,
        artifact=None,
        text_base64=None if text.isascii() else base64.b64encode(text).decode(),
    )
    return Settled(job="job-1", kind="bash", command="flood", exit_code=0, killed=False, output=window)


def test_a_result_cut_to_a_room_fits_it_keeps_the_end_and_saves_the_whole(tmp_path: Path) -> None:
    raw = os.urandom(45_000)
    room = clients.ResultRoom(max_bytes=10_000, max_lines=2000)
    answer, text = fitted(
        CALL_TOOLS["bash"], settled(raw), room, Keep.TAIL, lambda data: save_artifact(tmp_path, "call-x", data)
    )
    assert len(text.encode("utf-8", "surrogatepass")) <= room.max_bytes
    assert text.endswith("[exit 0]")
    output = answer.output  # type: ignore[attr-defined]
    assert output.bytes_kept + output.bytes_dropped == 45_000
    assert output.artifact is not None and Path(output.artifact).read_bytes() == raw
    assert re.search(r"dropped from the start; kept the last \d+ bytes", text)
    kept = base64.b64decode(output.text_base64) if output.text_base64 else output.text.encode()
    assert raw.endswith(kept) and len(kept) == output.bytes_kept


def test_a_result_that_fits_is_left_as_it_is(tmp_path: Path) -> None:
    answer = settled(b"hi\n")
    room = clients.ResultRoom(max_bytes=10_000, max_lines=2000)
    assert fitted(CALL_TOOLS["bash"], answer, room, Keep.TAIL, lambda data: (None, "unused")) == (
        answer,
        "hi\n[exit 0]",
    )
