"""Tie (S2 "A tool call"): 40 generated real tool calls on a Harness journal exactly what `core.job.journal` says.

Each call is a generated script (result bytes, warnings, usage reports, progress publications, then a return with
last bytes or a cancel); calls run in small concurrent groups on a real Harness over a real journal. Every commit
from a call's start is recorded and printed per call: `start` (its slot `running`), `settle ...` (read back from
the result entry), or `progress` for any other commit that touches the call's slot. The model has no `progress`, so
a journaled progress update would fail the comparison, as would a lost byte, warning or usage report. The model
counts the result bytes; the settle's bytes are also compared with the script's own (Truncation Off keeps them all).
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eukhe.core.bound import Off
from eukhe.core.job import (
    CallBegun,
    CallCancel,
    CallEvent,
    CallOutput,
    CallProgress,
    CallReturn,
    CallUsage,
    CallWarning,
    JournalRecord,
    SettleRecord,
    journal,
)
from eukhe.harness.harness import Harness
from eukhe.harness.tool import NoToolArgs, ToolExecutionApi, ToolRegistration
from eukhe.private_fs import make_private_dirs
from eukhe.records.journal import CallSettle, Commit, EntryRecord
from eukhe.records.journal import CallStart as StartRecordOnDisk
from eukhe.store.journal import Journal
from eukhe.store.ledger import Ledger
from eukhe.store.tree import Trees

CALLS = 40
GROUP = 4


@dataclass(frozen=True)
class Write:
    """The tool reports these result bytes."""

    data: bytes


@dataclass(frozen=True)
class Script:
    """One generated call: its steps, then how it ends."""

    call_id: str
    steps: tuple[Write | CallEvent, ...]  # Write, CallWarning, CallUsage, CallProgress
    last: bytes | None  # returned bytes (None: returns nothing)
    cancel: bool


def generate(rng: random.Random, index: int) -> Script:
    steps: list[Write | CallEvent] = []
    for _ in range(rng.randrange(0, 12)):
        kind = rng.randrange(4)
        if kind == 0:
            steps.append(Write(rng.randbytes(rng.randrange(0, 40))))
        elif kind == 1:
            steps.append(CallWarning(rng.choice(["slow", "retrying", "ü", "deprecated"]) + str(rng.randrange(9))))
        elif kind == 2:
            steps.append(CallUsage(tuple((name, rng.randrange(100)) for name in rng.sample(["in", "out", "ms"], 2))))
        else:
            steps.append(CallProgress(f"step {len(steps)}"))
    cancel = rng.random() < 0.35
    last = None if cancel or rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 20))
    return Script(f"call-{index:02d}", tuple(steps), last, cancel)


def model_events(script: Script) -> list[CallEvent]:
    events: list[CallEvent] = [CallBegun()]
    events.extend(CallOutput(len(step.data)) if isinstance(step, Write) else step for step in script.steps)
    if script.cancel:
        events.append(CallCancel())
    else:
        if script.last:
            events.append(CallOutput(len(script.last)))
        events.append(CallReturn())
    return events


def script_bytes(script: Script) -> bytes:
    """Every result byte the script's tool reports, in order."""
    data = b"".join(step.data for step in script.steps if isinstance(step, Write))
    return data + (script.last or b"") if not script.cancel else data


def render_settle(outcome: str, written: int, warnings: Any, usage: Any) -> str:
    usage_text = ";".join(",".join(f"{name}={amount}" for name, amount in report) for report in usage)
    return f"settle {outcome} written={written} warnings={list(warnings)!r} usage=[{usage_text}]"


def render_model(records: tuple[JournalRecord, ...]) -> list[str]:
    return [
        render_settle(r.outcome, r.written, r.warnings, r.usage) if isinstance(r, SettleRecord) else "start"
        for r in records
    ]


def settled_bytes(call_id: str, commits: list[Commit]) -> bytes:
    """The result bytes the call's result entry holds."""
    for commit in commits:
        for r in commit.records:
            if isinstance(r, EntryRecord) and r.kind == "tool_result" and r.content.get("call") == call_id:
                output = r.content["output"]
                exact = output.get("text_base64")
                return base64.b64decode(exact) if exact else output["text"].encode("utf-8")
    raise AssertionError(f"no result entry for {call_id}")


def render_commit(call_id: str, commit: Commit) -> str | None:
    """What one commit is for one call: start, settle (from its result entry), progress, or nothing."""
    starts = [r for r in commit.records if isinstance(r, StartRecordOnDisk) and r.call == call_id]
    settles = [r for r in commit.records if isinstance(r, CallSettle) and r.call == call_id]
    results = [
        r
        for r in commit.records
        if isinstance(r, EntryRecord) and r.kind == "tool_result" and r.content.get("call") == call_id
    ]
    if not starts and not settles and not results:
        return None
    if results and settles and not starts:
        content = results[0].content
        output = content["output"]
        usage = [tuple(report.items()) for report in content["usage_reports"]]
        written = output["bytes_kept"] + output["bytes_dropped"]
        return render_settle(content["status"], written, content["warnings"], usage)
    if starts and len(commit.records) == 1:
        return "start"
    return "progress"


def make_tool(scripts: Mapping[str, Script], parked: dict[str, asyncio.Event]) -> ToolRegistration:
    async def execute(args: NoToolArgs, api: ToolExecutionApi) -> bytes | None:
        script = scripts[api.call_id]
        for step in script.steps:
            if isinstance(step, Write):
                api.output(step.data)
            elif isinstance(step, CallWarning):
                api.diagnostic(step.text)
            elif isinstance(step, CallUsage):
                api.usage(**dict(step.usage))
            else:
                api.details(step.details if isinstance(step, CallProgress) else None)
                api.publish_progress()
            await asyncio.sleep(0)
        if script.cancel:
            parked[api.call_id].set()
            await asyncio.Event().wait()  # runs until aborted
        return script.last

    return ToolRegistration("scripted", NoToolArgs, execute, truncation=Off())


def test_a_real_tool_calls_journal_equals_the_model(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    scripts = {s.call_id: s for s in (generate(rng, i) for i in range(CALLS))}
    assert any(s.cancel for s in scripts.values())
    assert any(not s.cancel for s in scripts.values())
    expected = {call_id: render_model(journal(model_events(s))) for call_id, s in scripts.items()}

    async def scenario() -> dict[str, list[str]]:
        ledger = Ledger(Journal(tmp_path / "main.jsonl"), Trees(), [])
        harness = Harness(ledger, Off, make_private_dirs(tmp_path / "artifacts"))
        parked = {call_id: asyncio.Event() for call_id in scripts}
        harness.register(make_tool(scripts, parked))
        commits: list[Commit] = []
        ledger.journal.observers.append(commits.append)
        ids = list(scripts)

        async def one(call_id: str) -> None:
            task = asyncio.ensure_future(harness.call("scripted", {}, call_id=call_id))
            if scripts[call_id].cancel:
                await parked[call_id].wait()
                harness.abort(call_id)
            await task

        for low in range(0, len(ids), GROUP):
            await asyncio.gather(*(one(call_id) for call_id in ids[low : low + GROUP]))
        ledger.close()
        transcript: dict[str, list[str]] = {}
        for call_id in ids:
            lines = [line for commit in commits if (line := render_commit(call_id, commit)) is not None]
            transcript[call_id] = lines
            assert settled_bytes(call_id, commits) == script_bytes(scripts[call_id]), call_id
        return transcript

    real = asyncio.run(scenario())
    printed_real = "\n".join(f"{c}: {line}" for c in scripts for line in real[c])
    printed_model = "\n".join(f"{c}: {line}" for c in scripts for line in expected[c])
    print(printed_real)
    assert printed_real == printed_model
