"""The transport recipes of docs/transports.md, each run for real through a stand-in executable of its tool's name:
the stand-in records the argv it gets and runs what follows its own flags in an emulated sandbox
(tests/real/standin.py), so the test sees that the argv eukhe builds is what the real tool would get, and that a cell
runs through it and reads a file across the path map."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from eukhe.api import Session, Settled
from tests.real.kernel_support import run
from tests.real.sandboxes import need_root
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

DOC = Path(__file__).resolve().parents[2] / "docs" / "transports.md"
STANDIN = Path(__file__).resolve().parent / "standin.py"
RECIPES = dict(re.findall(r"<!-- recipe: ([\w-]+) -->\n```json\n(.*?)\n```", DOC.read_text(), flags=re.S))


def test_the_doc_has_every_recipe_the_issue_names() -> None:
    assert set(RECIPES) == {"docker-exec", "podman-exec", "docker-run", "ssh", "kubectl", "bwrap"}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_a_recipe_runs_a_cell_through_its_tool(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_root("the sandbox the stand-ins emulate (bubblewrap)")
    need_tools("bwrap")
    setting = json.loads(RECIPES[name])["kernel_transport"]
    (mount,) = setting["path_map"]
    host = tmp_path / "host"
    host.mkdir()
    (host / "data.txt").write_text("shared\n")
    # The recipe's host path becomes this test's; its sandbox path stays what the recipe says.
    setting = json.loads(json.dumps(setting).replace(mount["host"], str(host)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "podman", "kubectl", "ssh"):
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} {tool} "$@"\n')
        wrapper.chmod(0o755)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("EUKHE_STANDIN_LOG", str(log))
    monkeypatch.setenv("EUKHE_STANDIN_MOUNT", f"{host}:{setting['path_map'][0]['sandbox']}")
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("EUKHE_CODING_AGENT_DIR", str(agent))
    (agent / "settings.json").write_text(json.dumps({"kernel_transport": setting}))
    sandbox = setting["path_map"][0]["sandbox"]

    async def scenario() -> None:
        session = await Session.create(host, root=tmp_path / "sessions")
        try:
            answer = await session.ipython("import os\n(os.getcwd(), rlm.fs.read('data.txt').text)", budget_ms=60_000)
            assert isinstance(answer, Settled), answer
            assert answer.error is None, answer.error
            assert answer.result == repr((sandbox, "shared\n"))
        finally:
            await session.close()

    run(scenario())
    if name == "bwrap":
        return  # the real tool: nothing recorded
    (recorded,) = [json.loads(line) for line in log.read_text().splitlines()]
    prefix = setting["argv_prefix"]
    assert recorded[: len(prefix)] == prefix  # the tool got the recipe's argv, then the kernel command
    kernel_command = recorded[len(prefix) :]
    if setting.get("command") == "shell":
        assert len(kernel_command) == 1 and kernel_command[0].startswith(setting["python"] + " -c ")
    else:
        assert kernel_command[:2] == [setting["python"], "-c"]
