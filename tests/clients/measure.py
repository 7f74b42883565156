"""Measure what each real client does with an MCP tool result, apart from eukhe: the throwaway probe server
(`probe_server.py`) answers results of a chosen shape and size, the scripted model server records what the model read.

- The largest text result that reaches the model whole, per alphabet (1 to 4 UTF-8 bytes a character): one client
  run per alphabet, the script doubling the size from 4096 characters until the result is cut, then bisecting to
  the character (whole: the probe's exact text is in what the model read). Also what the model read at the first
  size cut, and at 200,000 characters.
- `both` (text and `structuredContent`) and `picture` (text, image, resource link): what the model read.
- The client's `initialize` (its `clientInfo`, capabilities, protocol version), as the probe server logged it;
  whether a tool call asks for a task when the server offers tasks.

    uv run python -m tests.clients.measure [--only LABEL ...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.clients.clients import CLAUDE, CODEX, CODEX_CODE_MODE, Client, run_client
from tests.clients.configs import Stdio
from tests.clients.model_server import Call, Read, Say, Script, Turn, calls, model_server
from tests.clients.probe_server import ALPHABETS, text
from tests.real.conftest import private_world

PROBE = Path(__file__).resolve().parent / "probe_server.py"
START = 4096
CAP = 4_000_000
BIG = 200_000

CODEX_BUNDLED = Client("codex", "gpt-5.5")
"""A bundled model Codex drives with function calls (its default model is in code mode)."""


def whole(read: Read) -> bool:
    size, alphabet = read.call.arguments["size"], read.call.arguments["alphabet"]
    return text(size, alphabet) in read.text


def bounds(read: Sequence[Read]) -> tuple[int, int | None]:
    """The largest size seen whole and the smallest seen cut (None: none yet)."""
    lo, hi = 0, None
    for one in read:
        if one.call.tool != "sized" or one.call.arguments["size"] == BIG:
            continue
        size = one.call.arguments["size"]
        if whole(one):
            lo = max(lo, size)
        else:
            hi = size if hi is None else min(hi, size)
    return lo, hi


def bisection(alphabet: str) -> Script:
    """Double from START until cut, bisect to one character, then read one result of BIG characters."""

    def script(read: Sequence[Read]) -> Turn:
        if read and read[-1].call.arguments["size"] == BIG:
            return Say("done")
        lo, hi = bounds(read)
        if hi is None:
            size = START if lo == 0 else lo * 2
            if size > CAP:
                return Call("sized", {"size": BIG, "alphabet": alphabet})
        elif hi - lo <= 1:
            return Call("sized", {"size": BIG, "alphabet": alphabet})
        else:
            size = (lo + hi) // 2
        return Call("sized", {"size": size, "alphabet": alphabet})

    return script


@dataclass
class Limit:
    """What a bisection found: the largest whole size, the smallest cut one, what the model read of each."""

    alphabet: str
    largest_whole: int
    smallest_cut: int | None
    at_cut: str = ""
    at_big: str = ""
    calls: int = 0


@dataclass
class Findings:
    """Everything measured of one client."""

    label: str
    limits: list[Limit] = field(default_factory=list)
    shapes: dict[str, Any] = field(default_factory=dict)
    initialize: Any = None
    task_asked: Any = None
    notes: list[str] = field(default_factory=list)


def ends(value: str, width: int = 400) -> str:
    """A long text as its head and tail (a cut shows at one of them, or as a marker in it)."""
    if len(value) <= 2 * width:
        return value
    return value[:width] + f" ...[{len(value) - 2 * width} chars]... " + value[-width:]


def probe_run(
    client: Client, script: Script, *, tasks: bool = False, env: dict[str, str] | None = None, codex_extra: str = ""
) -> tuple[list[Read], list[dict[str, Any]], str]:
    """One client run against the probe server: what the model read, what the client sent the probe, its stderr."""
    with private_world("ekm") as world:
        (world.root / "home").mkdir()
        cwd = world.root / "w"
        cwd.mkdir()
        log = world.root / "probe.jsonl"
        server = Stdio(sys.executable, (str(PROBE), "--log", str(log), *(["--tasks"] if tasks else [])), "probe")
        with model_server(script, server="probe") as model:
            finished = run_client(client, server, {**world.env, **(env or {})}, cwd, model.url, codex_extra=codex_extra)
            assert not model.failures, model.failures
            read = list(model.read)
        sent = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return read, sent, finished.stderr


def limit_of(client: Client, alphabet: str, env: dict[str, str] | None = None, codex_extra: str = "") -> Limit:
    read, _, stderr = probe_run(client, bisection(alphabet), env=env, codex_extra=codex_extra)
    lo, hi = bounds(read)
    found = Limit(alphabet, lo, hi, calls=len(read))
    for one in read:
        if one.call.arguments["size"] == hi:
            found.at_cut = ends(one.text)
        if one.call.arguments["size"] == BIG:
            found.at_big = ends(one.text)
    if not read:
        found.at_cut = f"no call reached the model server: {stderr[-2000:]}"
    return found


def shapes_of(client: Client, findings: Findings) -> None:
    read, sent, _ = probe_run(client, calls(Call("both", {}), Call("picture", {})))
    for one in read:
        findings.shapes[one.call.tool] = {
            "texts": [ends(t, 300) for t in one.texts],
            "images": [image.mime_type for image in one.images],
            "raw": ends(json.dumps(one.raw), 600),
        }
    findings.initialize = next((m for m in sent if m.get("method") == "initialize"), None)
    read, sent, _ = probe_run(client, calls(Call("sized", {"size": 10, "alphabet": "ascii"})), tasks=True)
    asked = [m for m in sent if m.get("method") == "tools/call"]
    findings.task_asked = {
        "tools/call params": [m.get("params") for m in asked],
        "other methods": sorted({m.get("method") for m in sent} - {"tools/call"}),
        "read": [one.text for one in read],
    }


def measure(client: Client, label: str, alphabets: Sequence[str]) -> Findings:
    findings = Findings(label)
    if client != CODEX_BUNDLED:  # its tool search (BM25) does not find the probe's `both` by that name
        shapes_of(client, findings)
    for alphabet in alphabets:
        findings.limits.append(limit_of(client, alphabet))
    return findings


def show(findings: Findings) -> None:
    print(f"== {findings.label}")
    for limit in findings.limits:
        found = f"whole up to {limit.largest_whole}, cut from {limit.smallest_cut}"
        print(f"  {limit.alphabet}: {found} ({limit.calls} calls)")
        print(f"     at the cut: {limit.at_cut!r}")
        print(f"     at {BIG}: {limit.at_big!r}")
    for name, shape in findings.shapes.items():
        print(f"  {name}: {shape}")
    print(f"  initialize: {json.dumps(findings.initialize)}")
    print(f"  tasks offered: {json.dumps(findings.task_asked)}")
    for note in findings.notes:
        print(f"  {note}")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    alphabets = list(ALPHABETS)
    plans: list[tuple[str, Any]] = [
        (CLAUDE.label, lambda: measure(CLAUDE, CLAUDE.label, alphabets)),
        (CODEX.label, lambda: measure(CODEX, CODEX.label, alphabets)),
        (CODEX_BUNDLED.label, lambda: measure(CODEX_BUNDLED, CODEX_BUNDLED.label, alphabets)),
        (CODEX_CODE_MODE.label, lambda: measure(CODEX_CODE_MODE, CODEX_CODE_MODE.label, alphabets)),
        (
            "claude-MAX_MCP_OUTPUT_TOKENS=50000",
            lambda: Findings(
                "claude-MAX_MCP_OUTPUT_TOKENS=50000",
                [limit_of(CLAUDE, "ascii", env={"MAX_MCP_OUTPUT_TOKENS": "50000"})],
            ),
        ),
        (
            "codex-test-model-tool_output_token_limit=50000",
            lambda: Findings(
                "codex-test-model-tool_output_token_limit=50000",
                [limit_of(CODEX, "ascii", codex_extra="tool_output_token_limit = 50000")],
            ),
        ),
    ]
    results = []
    for label, plan in plans:
        if args.only and label not in args.only:
            continue
        findings = plan()
        show(findings)
        results.append(findings)
    if args.out is not None:
        args.out.write_text(json.dumps([vars(f) | {"limits": [vars(x) for x in f.limits]} for f in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
