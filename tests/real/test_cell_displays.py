"""A cell's rich displays through the Python API and `eukhe ipython --json`: each image a `Display` record (MIME
type, bytes, size, its artifact in the session's artifacts dir), also for a cell that detached and ended as a job;
Markdown and HTML give text."""

from __future__ import annotations

from pathlib import Path

import pytest

from eukhe.api import Detached, Display, Session, SessionSettings, Settled
from eukhe.core.pictures import PNG_SIGNATURE
from tests.real.conftest import DaemonEnv
from tests.real.kernel_support import run

pytestmark = pytest.mark.real

PNG = PNG_SIGNATURE + b"\0\0\0\rIHDR\0\0\0\x05\0\0\0\x04" + b"pixels"
DEFINE = f"class Png:\n    def _repr_png_(self):\n        return {PNG!r}\n"
HTML = (
    "class Table:\n"
    "    def _repr_html_(self):\n"
    "        return '<style>td {{}}</style><table><tr><th>name</th><th>n</th></tr>"
    "<tr><td>a &amp; b</td><td>1</td></tr></table><p>two<br>lines</p>'\n"
    "class Note:\n"
    "    def _repr_markdown_(self):\n"
    "        return '**bold**'\n"
)


def test_the_python_api_answers_a_cells_images_as_records_with_their_artifacts(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    go = work / "go"

    async def scenario() -> None:
        session = await Session.create(
            work, root=tmp_path / "sessions", settings=SessionSettings(tool_blocking_budget_ms=20_000)
        )
        try:
            shown = await session.ipython(DEFINE + "display(Png())\nPng()")
            assert isinstance(shown, Settled)
            assert [(d.mime_type, d.bytes, d.width, d.height, d.shown) for d in shown.displays] == [
                ("image/png", len(PNG), 5, 4, True)
            ] * 2
            for display in shown.displays:
                assert isinstance(display, Display)
                assert display.artifact is not None
                artifact = Path(display.artifact)
                assert artifact.parent == session.artifact_dir
                assert artifact.read_bytes() == PNG
                assert artifact.stat().st_mode & 0o777 == 0o600
            assert shown.displays_notice is None

            late = await session.ipython(
                f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\nPng()", budget_ms=100
            )
            assert isinstance(late, Detached)
            go.touch()
            ended = await session.jobs.wait(late.job, 20_000)
            assert isinstance(ended, Settled)
            (display,) = ended.displays  # a cell job's end carries its images too
            assert display.artifact is not None and Path(display.artifact).read_bytes() == PNG
            await session.close()
            session = await Session.open(session.id, root=tmp_path / "sessions")
            past = await session.jobs.wait(late.job, 20_000)  # a job of an earlier life: its journaled end
            assert isinstance(past, Settled)
            assert past.displays == ended.displays

            text = await session.ipython(HTML + "display(Table())\nNote()")
            assert isinstance(text, Settled)
            assert text.output.text == "name | n\na & b | 1\ntwo\nlines\n"
            assert text.result == "**bold**"
            assert text.displays == []
        finally:
            await session.close()

    run(scenario())


def test_eukhe_ipython_json_names_the_displays(world: DaemonEnv) -> None:
    project = world.root / "project"
    project.mkdir()
    session = str(world.json("session", "create", "--cwd", str(project))["id"])
    answer = world.json("ipython", "--session", session, "-c", DEFINE + "Png()")
    (display,) = answer["displays"]
    assert {key: display[key] for key in ("mime_type", "bytes", "width", "height", "shown", "withheld")} == {
        "mime_type": "image/png",
        "bytes": len(PNG),
        "width": 5,
        "height": 4,
        "shown": True,
        "withheld": None,
    }
    assert Path(display["artifact"]).read_bytes() == PNG
    assert (answer["displays_notice"], answer["displays_dropped"]) == (None, 0)
    fields = {"mime_type", "bytes", "width", "height", "artifact", "shown", "withheld", "artifact_error"}
    assert set(display) == fields  # the bytes are in the artifact, not in the answer (nor in the journal)
