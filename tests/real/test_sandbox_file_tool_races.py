"""The file tools against a racing cell (the escape battery): a confined cell swaps a directory and a symlink to the
denied `~/.ssh`, or to a directory outside the workspace, in a tight loop while it calls `rlm.fs.read`,
`rlm.fs.grep`, `rlm.fs.glob` and `rlm.fs.write` under that directory. Nothing denied is read, nothing lands outside.
With `--sandbox off` the same race reaches the key (the tools have the user's rights there), so each test can fail.
Real bubblewrap, a real kernel, a real daemon."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.real import test_sandbox_escapes as escapes
from tests.real.test_sandbox_escapes import SECRET, Box

pytestmark = pytest.mark.real

TRIES = 2000

SWAPPER = """
import os, threading
os.makedirs('dreal', exist_ok=True)
open('dreal/id_ed25519', 'w').write('decoy\\n')
os.rename('dreal', 'd')
stop = threading.Event()
def swap():
    while not stop.is_set():
        try:
            os.symlink({target!r}, 'dlink')
            os.rename('d', 'dreal')
            os.rename('dlink', 'd')
            os.rename('d', 'dlink')
            os.rename('dreal', 'd')
            os.unlink('dlink')
        except OSError:
            pass
swapper = threading.Thread(target=swap, daemon=True)
swapper.start()
seen = []
"""

ATTEMPTS = {
    "read": "rlm.fs.read('d/id_ed25519').text",
    "grep": "rlm.fs.grep('.', 'd').text",
    "glob": "rlm.fs.glob('*', 'd').text",
    "write": "rlm.fs.write('d/pwned', 'x').text",
}


CELL_DEADLINE_S = 600
"""How long a racing cell may take on a loaded machine before the test calls it a hang."""

box = escapes.box  # the same sandboxed and unconfined sessions as the escape battery


def race(box: Box, target: Path, attempt: str) -> str:
    """Run the swapper and TRIES attempts in one cell; everything the attempts answered, as one text."""
    code = (
        SWAPPER.format(target=str(target))
        + f"""
for _ in range({TRIES}):
    try:
        seen.append({attempt})
    except rlm.FsError as error:
        seen.append('refused: ' + error.reason)
stop.set()
swapper.join()
print('\\n'.join(seen))
"""
    )
    answer = box.world.json("ipython", "--session", box.session, "--budget-ms", "240000", "-c", code, timeout=300)
    deadline = time.monotonic() + CELL_DEADLINE_S
    while answer["status"] == "detached":  # past the session's 30 s budget (a loaded machine): wait for its end
        assert time.monotonic() < deadline, answer
        answer = box.world.json("jobs", "wait", "--session", box.session, str(answer["job"]), timeout=300)
    assert answer["status"] == "settled", answer
    return json.dumps(answer)


@pytest.mark.parametrize("tool", ["read", "grep"])
def test_a_racing_cell_never_reads_a_denied_key_through_the_file_tools(box: Box, tool: str) -> None:
    (box.home / ".ssh" / "id_ed25519").write_text(SECRET + "\n")
    text = race(box, box.home / ".ssh", ATTEMPTS[tool])
    assert (SECRET in text) is not box.confined, text[-2000:]


def test_a_racing_cell_never_lists_a_denied_directory(box: Box) -> None:
    (box.home / ".ssh" / "secret-name").write_text("x")
    text = race(box, box.home / ".ssh", ATTEMPTS["glob"])
    assert ("secret-name" in text) is not box.confined, text[-2000:]


def test_a_racing_cell_never_writes_outside_the_workspace(box: Box) -> None:
    outside = box.outside.parent / "elsewhere"
    outside.mkdir()
    race(box, outside, ATTEMPTS["write"])
    if box.confined:
        assert not (outside / "pwned").exists()
    # Unconfined, the tools have the user's rights: a write through the symlink is allowed, but rarely wins a race
    # that the tools refuse whenever the path changes under them, so nothing is asserted there.
