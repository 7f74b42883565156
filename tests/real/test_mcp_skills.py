"""The skills over MCP, with the real client: the catalog in the server's instructions (name and description only,
within 2 KB) and each offered skill's files as `skill://<name>/<path>` resources, found afresh at each list."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from eukhe.core.skills import CATALOG_HEAD
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import DEADLINE_S, mcp_server, run, workdir
from tests.skills_support import (
    SECRET,
    UNREADABLE_SKILLS,
    write_hostile_files,
    write_secret,
    write_skill,
    write_unreadable_skill_files,
)

pytestmark = pytest.mark.real

SESSION_URIS = {"eukhe://session/running-jobs", "eukhe://session/calls", "eukhe://session/jobs"}
PNG = b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary"


def test_the_instructions_carry_the_catalog_and_the_resources_each_skills_files(world: DaemonEnv) -> None:
    cwd = workdir(world)
    Path(world.env["HOME"]).mkdir(exist_ok=True)
    write_skill(
        cwd / ".agents" / "skills",
        "pdf-tools",
        {"name": "pdf-tools", "description": "Fill PDF forms."},
        body="# PDF tools\nRun scripts/fill.py.\n",
        files={"scripts/fill.py": "print('fill')\n", "assets/logo.png": PNG, "references/a b.md": "spaced\n"},
    )
    write_skill(world.agent_dir / "skills", "mine", {"name": "mine", "description": "The user's own."})
    write_skill(cwd / ".agents" / "skills", "broken", {"name": "not-broken", "description": "Never offered."})

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            instructions = server.init.instructions or ""
            catalog = instructions[instructions.index(CATALOG_HEAD) :]
            assert catalog.splitlines()[1:] == ["- mine: The user's own.", "- pdf-tools: Fill PDF forms."]
            assert "Never offered" not in instructions and "Run scripts" not in instructions  # no body: level one

            listed = await server.client.list_resources()
            uris = {str(r.uri): r for r in listed.resources}
            assert set(uris) == SESSION_URIS | {
                "skill://mine/SKILL.md",
                "skill://pdf-tools/SKILL.md",
                "skill://pdf-tools/assets/logo.png",
                "skill://pdf-tools/references/a%20b.md",
                "skill://pdf-tools/scripts/fill.py",
            }
            assert uris["skill://pdf-tools/SKILL.md"].description == "Fill PDF forms."

            async def read(uri: str) -> types.TextResourceContents | types.BlobResourceContents:
                (contents,) = (await server.client.read_resource(uri)).contents
                return contents

            skill_md = await read("skill://pdf-tools/SKILL.md")
            assert isinstance(skill_md, types.TextResourceContents)
            assert skill_md.text.startswith("---\nname: pdf-tools\n") and skill_md.text.endswith(
                "Run scripts/fill.py.\n"
            )
            script = await read("skill://pdf-tools/scripts/fill.py")
            assert isinstance(script, types.TextResourceContents) and script.text == "print('fill')\n"
            spaced = await read("skill://pdf-tools/references/a%20b.md")
            assert isinstance(spaced, types.TextResourceContents) and spaced.text == "spaced\n"
            logo = await read("skill://pdf-tools/assets/logo.png")
            assert isinstance(logo, types.BlobResourceContents) and base64.b64decode(logo.blob) == PNG
            assert logo.mime_type == "image/png"

            for unknown in (
                "skill://broken/SKILL.md",
                "skill://pdf-tools/../broken/SKILL.md",
                "skill://pdf-tools/nope",
            ):
                with pytest.raises(MCPError):
                    await read(unknown)

            # a skill changed on disk shows at the next list and read
            write_skill(cwd / ".claude" / "skills", "fresh", files={"notes.txt": "new\n"})
            (cwd / ".agents" / "skills" / "pdf-tools" / "scripts" / "fill.py").write_text("print('changed')\n")
            (cwd / ".agents" / "skills" / "pdf-tools" / "assets" / "logo.png").unlink()
            listed = {str(r.uri) for r in (await server.client.list_resources()).resources}
            assert {"skill://fresh/SKILL.md", "skill://fresh/notes.txt"} <= listed
            assert "skill://pdf-tools/assets/logo.png" not in listed
            changed = await read("skill://pdf-tools/scripts/fill.py")
            assert isinstance(changed, types.TextResourceContents) and changed.text == "print('changed')\n"

    run(scenario)


def test_the_instructions_with_the_catalog_stay_within_2_kb_and_say_how_many_were_left_out(world: DaemonEnv) -> None:
    cwd = workdir(world)
    Path(world.env["HOME"]).mkdir(exist_ok=True)
    for index in range(40):
        name = f"skill-{index:02}"
        write_skill(cwd / ".agents" / "skills", name, {"name": name, "description": "d" * 100})

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            instructions = server.init.instructions or ""
            catalog = instructions[instructions.index(CATALOG_HEAD) :]
            assert len(instructions.encode()) <= 2048  # the whole, the catalog's part included
            assert instructions.startswith("eukhe runs your shell commands")
            lines = catalog.splitlines()
            kept = len(lines) - 2
            assert 0 < kept < 40
            assert lines[-1].startswith(f"({40 - kept} more skills left out here")
            listed = {str(r.uri) for r in (await server.client.list_resources()).resources}
            assert sum(uri.endswith("/SKILL.md") for uri in listed) == 40  # the resources list them all

    run(scenario)


def test_no_skill_leaves_the_instructions_and_resources_as_they_were(world: DaemonEnv) -> None:
    cwd = workdir(world)

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(cwd)) as server:
            assert CATALOG_HEAD not in (server.init.instructions or "")
            listed = await server.client.list_resources()
            assert {str(r.uri) for r in listed.resources} == SESSION_URIS

    run(scenario)


def test_a_skills_symlinks_fifos_and_devices_are_neither_listed_nor_read_and_a_file_over_the_cap_is_refused(
    world: DaemonEnv,
) -> None:
    """What a confined job can put in a project skill: files that are a symlink to a secret, a FIFO, a symlink to
    /dev/zero, a symlinked directory, and a file over the cap. The server starts, lists and reads at once (each
    step within a deadline), lists none of the first four, refuses each by name, and refuses the large one with a
    clear error; no answer holds the secret. SKILL.md files of that kind make their skill invalid: not offered."""
    cwd = workdir(world)
    home = Path(world.env["HOME"])
    home.mkdir(exist_ok=True)
    secret = write_secret(home)
    root = cwd / ".claude" / "skills"
    skill = write_skill(root, "tricky", files={"ok.txt": "fine\n"})
    write_hostile_files(skill, secret)
    (skill / "big.bin").write_bytes(b"\0" * ((8 << 20) + 1))
    write_unreadable_skill_files(root, secret)

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with mcp_server(world, "--cwd", str(cwd)) as server:
                instructions = server.init.instructions or ""
                catalog = instructions[instructions.index(CATALOG_HEAD) :]
                assert catalog.splitlines()[1:] == ["- tricky: The tricky skill."]  # the md-* skills: invalid
                assert SECRET not in instructions
                listed = {str(r.uri) for r in (await server.client.list_resources()).resources}
                assert listed - SESSION_URIS == {
                    "skill://tricky/SKILL.md",
                    "skill://tricky/big.bin",
                    "skill://tricky/ok.txt",
                }
                (ok,) = (await server.client.read_resource("skill://tricky/ok.txt")).contents
                assert isinstance(ok, types.TextResourceContents) and ok.text == "fine\n"
                for name in ("notes.txt", "pipe", "zero", "keys/id_ed25519", "scripts/key"):
                    with pytest.raises(MCPError) as refused:
                        await server.client.read_resource(f"skill://tricky/{name}")
                    assert "only its regular files are served" in str(refused.value)
                    assert SECRET not in str(refused.value)
                with pytest.raises(MCPError) as large:
                    await server.client.read_resource("skill://tricky/big.bin")
                assert "larger than 8 MiB" in str(large.value) and "not served" in str(large.value)
                for name in UNREADABLE_SKILLS:
                    with pytest.raises(MCPError):
                        await server.client.read_resource(f"skill://{name}/SKILL.md")

    run(scenario)
    assert SECRET not in "".join(path.read_text() for path in world.root.glob("mcp-*.err"))
