"""What a model reads through `eukhe mcp`: the text alone by default (clients that get `structuredContent` hand the
model the record instead), the record with `--structured`; and a text cut to what the client shows whole, with
eukhe's notice and exact counts over the whole output, so no client cuts it again."""

from __future__ import annotations

import json
import re
from pathlib import Path

from eukhe.core.clients import KNOWN_CLIENTS
from tests.real.conftest import DaemonEnv
from tests.real.test_mcp_server import mcp_server, run, text_of, workdir

NOTICE = re.compile(
    r"\[output truncated: (\d+) bytes \((\d+) lines\) dropped from the (start|end); kept the (?:last|first) "
    r"(\d+) bytes \((\d+) lines\); full output: (\S+)\]"
)
BUDGET = {"budget_ms": 60_000}


def test_mcp_results_are_the_text_alone_by_default_and_the_record_with_structured(world: DaemonEnv) -> None:
    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world)), structured=False) as server:
            listed = await server.client.list_tools()
            assert all(tool.output_schema is None for tool in listed.tools)
            result = await server.call("bash", {"command": "printf 'a\\033[31mred\\033[0m\\r50%%\\r100%%\\n'"})
            assert result.structured_content is None
            assert text_of(result) == "100%\n[exit 0]"
        async with mcp_server(world, "--cwd", str(workdir(world)), structured=True) as server:
            listed = await server.client.list_tools()
            assert all(tool.output_schema is not None for tool in listed.tools)
            result = await server.call("bash", {"command": "echo hi"})
            assert result.structured_content is not None and result.structured_content["exit_code"] == 0

    run(scenario)


def flood_counts(text: str) -> tuple[int, int, int, int]:
    """The notice's bytes dropped and kept, lines dropped and kept."""
    found = NOTICE.search(text)
    assert found is not None, text[:400]
    return int(found.group(1)), int(found.group(4)), int(found.group(2)), int(found.group(5))


def test_mcp_a_flood_fits_a_known_clients_room_with_the_notice_true_over_the_whole_output(world: DaemonEnv) -> None:
    total_bytes = sum(len(f"{n}\n") for n in range(1, 200_001))
    codex = KNOWN_CLIENTS["codex-mcp-client"]

    async def scenario() -> None:
        async with mcp_server(
            world, "--cwd", str(workdir(world)), structured=False, client_name="codex-mcp-client"
        ) as server:
            text = await server.text("bash", {"command": "seq 1 200000", **BUDGET})
            assert len(text.encode()) <= codex.max_bytes, len(text.encode())
            assert text.endswith("199999\n200000\n[exit 0]"), text[-200:]
            dropped, kept, lines_dropped, lines_kept = flood_counts(text)
            assert dropped + kept == total_bytes
            assert lines_dropped + lines_kept == 200_000
            shown = text.split("]\n", 1)[1].rsplit("[exit 0]", 1)[0]
            assert len(shown.encode()) == kept
            random = await server.text("bash", {"command": "head -c 45000 /dev/urandom", **BUDGET})
            assert len(random.encode()) <= codex.max_bytes
            dropped, kept, _, _ = flood_counts(random)
            assert dropped + kept == 45_000
            found = NOTICE.search(random)
            assert found is not None
            assert Path(found.group(6)).stat().st_size == 45_000, "the cut for the client kept the whole output first"

    run(scenario)


def test_mcp_the_users_mcp_result_max_bytes_sets_the_room_of_any_client(world: DaemonEnv) -> None:
    world.agent_dir.mkdir(parents=True, exist_ok=True)
    (world.agent_dir / "settings.json").write_text(json.dumps({"mcp_result_max_bytes": 8192}))
    big = workdir(world) / "big.txt"
    big.write_text("".join(f"line {n} of a long file\n" for n in range(5000)))

    async def scenario() -> None:
        async with mcp_server(world, "--cwd", str(workdir(world)), structured=False) as server:
            text = await server.text("read", {"path": "big.txt"})
            assert len(text.encode()) <= 8192
            assert text.startswith("line 0 of a long file\n")
            dropped, kept, _, _ = flood_counts(text)
            assert kept + dropped == big.stat().st_size
            assert re.search(r"lines 1-5000 of 5000; read on with offset \d+\]$", text), text[-200:]

    run(scenario)
