"""Benchmark: a `bash true` call as the real clients see it, against eukhe's own time for the same call, in one run.

Per client (Claude Code, Codex with a model it does not know, Codex in code mode with its default bundled model),
one headless run against a scripted model server (tests/clients/model_server.py) makes `--calls` `bash true` calls
through `eukhe mcp` (stdio, the README's config). The client's time for a call is the model server's: from the end
of the response that asked for the call to the request that carried its result back (the client's dispatch, the MCP
round trip, its own handling and its next request). eukhe's time is the journaled call's own, from its start to its
settle (`eukhe session calls`, milliseconds). Prints the medians and their ratio: the client's overhead. No target:
it is there to watch. Needs the npm tools of tests/npm; each client runs in a private world.

    uv run python bench/clients_roundtrip.py [--calls N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

from tests.clients.clients import CLAUDE, CODEX, CODEX_CODE_MODE, Client, run_client
from tests.clients.configs import Stdio, readme_stdio
from tests.clients.model_server import Call, calls, model_server
from tests.npm_tools import npm_tool
from tests.real.conftest import private_world

REPO = Path(__file__).resolve().parents[1]


def measure(client: Client, count: int, uv: str) -> tuple[list[float], list[float]]:
    """The client's times and eukhe's own times (seconds) of `count` `bash true` calls in one client run."""
    with private_world("ekb") as world:
        (world.root / "home").mkdir()
        world.env["EUKHE_CODING_AGENT_DIR"] = str(world.root / "home" / ".eukhe")
        cwd = world.root / "w"
        cwd.mkdir()
        world.cli("daemon", "start")
        script = calls(*[Call("bash", {"command": "true"})] * count)
        with model_server(script) as model:
            finished = run_client(client, Stdio(uv, readme_stdio(str(REPO)).args), world.env, cwd, model.url)
            read = list(model.read)
        assert not model.failures, model.failures
        assert len(read) == count, finished
        [session] = world.json("session", "list")["sessions"]
        rows = [row for row in world.json("session", "calls", session["id"])["calls"] if row["tool"] == "bash"]
        assert len(rows) == count, rows
        return [one.received_at - one.sent_at for one in read], [
            (row["settled_ms"] - row["started_ms"]) / 1000 for row in rows
        ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    uv = shutil.which("uv")
    if uv is None:
        print("needs uv on PATH (the README's config runs eukhe with it)")
        return 1
    for client in (CLAUDE, CODEX, CODEX_CODE_MODE):
        if npm_tool(client.name) is None:
            print(f"{client.label:<24}skipped: npm ci --prefix tests/npm")
            continue
        seen, own = measure(client, args.calls, uv)
        client_ms, eukhe_ms = statistics.median(seen) * 1000, statistics.median(own) * 1000
        print(
            f"{client.label:<24}client {client_ms:7.1f} ms  eukhe {eukhe_ms:6.1f} ms  "
            f"ratio {client_ms / max(eukhe_ms, 1.0):5.1f}x  (medians of {args.calls} bash true calls; "
            f"client best {min(seen) * 1000:.1f} ms)"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
