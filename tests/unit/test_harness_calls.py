"""Tool calls on a Harness (S2 "A tool call"): two journal records per call, progress only on the live board.

Includes the spec's regression tests `live_deltas::a_long_streaming_call_commits_nothing_between_its_start_and_its_
settle` (and the other live-delta tests: what each publication delivers, no commit) and
`settles_an_aborted_tools_slot_with_its_status_and_entry_only`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from eukhe.core.bound import Keep, Off, On, OutputLimits
from eukhe.errors import InputError
from eukhe.harness.harness import CallNotRunningError, Harness, UnknownToolError
from eukhe.harness.tool import ToolExecutionApi, ToolRegistration, reporting_for
from eukhe.private_fs import make_private_dirs
from eukhe.records.base import Record
from eukhe.records.journal import CallSettle, CallStart, Commit, EntryRecord, JournalRecord
from eukhe.store.journal import Journal, JournalError
from eukhe.store.ledger import Ledger
from eukhe.store.tree import Trees


class NArgs(Record):
    """The test tools' arguments: an optional integer."""

    n: int | None = None


def jsons(events: Sequence[Record]) -> list[dict[str, Any]]:
    return [event.to_json() for event in events]


class FaultyJournal(Journal):
    """A journal whose disk refuses the commits a test names (by the slot status or entry kind they hold)."""

    refuse: set[str]

    def _before_write(self, records: Sequence[JournalRecord]) -> None:
        for record in records:
            tag = (
                "call_settle"
                if isinstance(record, CallSettle)
                else f"entry:{record.kind}"
                if isinstance(record, EntryRecord)
                else type(record).__name__
            )
            if tag in getattr(self, "refuse", set()):
                raise JournalError(self.path, f"refused {tag}")


def make_harness(
    tmp_path: Path, truncation: Any = None, journal_cls: type[Journal] = Journal
) -> tuple[Harness, Ledger]:
    artifacts = make_private_dirs(tmp_path / "artifacts")
    ledger = Ledger(journal_cls(tmp_path / "main.jsonl"), Trees(), [])
    harness = Harness(ledger, lambda: truncation or Off(), artifacts)
    return harness, ledger


def gate_tool(name: str, gate: asyncio.Event, chunks: int, started: asyncio.Event | None = None) -> ToolRegistration:
    async def execute(args: NArgs, api: ToolExecutionApi) -> bytes:
        for index in range(chunks):
            api.output(f"chunk {index}\n")
            api.usage(tokens=1)
            api.publish_progress()
            if started is not None and index == 0:
                started.set()
            await asyncio.sleep(0)
        await gate.wait()
        return b"done\n"

    return ToolRegistration(name, NArgs, execute)


def test_a_long_streaming_call_commits_nothing_between_its_start_and_its_settle(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path)
        gate = asyncio.Event()
        harness.register(gate_tool("stream", gate, 300))
        commits: list[Commit] = []
        ledger.journal.observers.append(commits.append)
        async with harness.watch_events() as events:
            call = asyncio.ensure_future(harness.call("stream", {}))
            for _ in range(400):
                await asyncio.sleep(0)
            assert len(commits) == 1  # only the start, after 300 publications
            assert isinstance(commits[0].records[0], CallStart)
            updates = [e for e in jsons(events.pending()) if e["type"] == "tool_execution_update"]
            assert len(updates) == 300
            gate.set()
            result = await call
        assert len(commits) == 2
        assert [type(r) for r in commits[1].records] == [CallSettle, EntryRecord]
        assert result.output.text.count("chunk") == 300
        assert result.usage_totals == {"tokens": 300}
        ledger.close()

    asyncio.run(scenario())


def test_each_publication_delivers_the_progress_reported_so_far_and_commits_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path)
        step = asyncio.Event()
        resume = asyncio.Event()

        async def execute(args: NArgs, api: ToolExecutionApi) -> None:
            api.output("a")
            api.details({"phase": 1})
            api.publish_progress()
            api.output("b")  # reported, not published yet
            api.diagnostic("careful")
            api.usage(tokens=2)
            step.set()
            await resume.wait()
            api.publish_progress()

        harness.register(ToolRegistration("t", NArgs, execute))
        commits: list[Commit] = []
        ledger.journal.observers.append(commits.append)
        async with harness.watch_events() as events:
            call = asyncio.ensure_future(harness.call("t", {}, call_id="c1"))
            await step.wait()
            first = jsons(events.pending())
            assert first[0] == {"type": "snapshot", "calls": []}
            (update,) = first[1:]
            assert update["type"] == "tool_execution_update"
            assert update["call"] == "c1"
            assert update["progress"]["output"]["text"] == "a"
            assert update["progress"]["details"] == {"phase": 1}
            assert update["progress"]["diagnostics"] == []
            # a late observer's snapshot holds the last *published* progress of the running call
            async with harness.watch_events() as late:
                (snapshot,) = jsons(late.pending())
                assert snapshot["calls"] == [{"call": "c1", "tool": "t", "progress": update["progress"]}]
            assert len(commits) == 1
            resume.set()
            await call
            rest = jsons(events.pending())
            assert [e["type"] for e in rest] == ["tool_execution_update", "tool_execution_end"]
            assert rest[0]["progress"]["output"]["text"] == "ab"
            assert rest[0]["progress"]["diagnostics"] == ["careful"]
            assert rest[0]["progress"]["usage"] == [{"tokens": 2}]
        ledger.close()

    asyncio.run(scenario())


def test_no_update_is_sent_after_the_call_ends(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path)
        kept: list[ToolExecutionApi] = []

        async def execute(args: NArgs, api: ToolExecutionApi) -> None:
            kept.append(api)
            api.output("x")
            api.publish_progress()

        harness.register(ToolRegistration("t", NArgs, execute))
        async with harness.watch_events() as events:
            await harness.call("t", {})
            kept[0].output("late")
            kept[0].publish_progress()  # the call ended: nothing goes out
            types = [e["type"] for e in jsons(events.pending())]
            assert types == ["snapshot", "tool_execution_update", "tool_execution_end"]
            async with harness.watch_events() as late:
                assert jsons(late.pending()) == [{"type": "snapshot", "calls": []}]
        ledger.close()

    asyncio.run(scenario())


def test_view_state_shows_a_running_calls_slot_without_output(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path)
        gate = asyncio.Event()
        started = asyncio.Event()
        harness.register(gate_tool("t", gate, 3, started))
        call = asyncio.ensure_future(harness.call("t", {"n": 1}, call_id="c1"))
        await started.wait()
        slot = ledger.trees.state().slots["c1"]
        assert slot.status == "running"
        assert slot.args == {"n": 1}
        assert "output" not in str(slot.checkpoint).replace("output-c1", "")
        gate.set()
        await call
        assert ledger.trees.state().slots["c1"].status == "done"
        ledger.close()

    asyncio.run(scenario())


def test_settles_an_aborted_tools_slot_with_its_status_and_entry_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path)
        reported = asyncio.Event()

        async def execute(args: NArgs, api: ToolExecutionApi) -> None:
            api.output("published ")
            api.publish_progress()
            api.output("unpublished")
            api.diagnostic("w1")
            api.usage(tokens=5)
            reported.set()
            await asyncio.Event().wait()  # never returns

        harness.register(ToolRegistration("t", NArgs, execute))
        commits: list[Commit] = []
        ledger.journal.observers.append(commits.append)
        call = asyncio.ensure_future(harness.call("t", {}, call_id="c1"))
        await reported.wait()
        harness.abort("c1")
        result = await call
        assert result.status == "cancelled"
        assert result.output.text == "published unpublished"
        assert result.warnings == ("w1",)
        assert result.usage == ({"tokens": 5},)
        start, settle = commits
        assert [type(r) for r in start.records] == [CallStart]
        slot, entry = settle.records
        assert (type(slot), slot.call, slot.outcome) == (CallSettle, "c1", "cancelled")
        assert isinstance(slot, CallSettle) and slot.at_ms is not None, "the settle records when it happened"
        assert isinstance(entry, EntryRecord)
        assert entry.kind == "tool_result"
        assert entry.content["status"] == "cancelled"
        assert entry.content["output"]["text"] == "published unpublished"
        assert harness.running_calls() == []
        with pytest.raises(CallNotRunningError):
            harness.abort("c1")
        ledger.close()

    asyncio.run(scenario())


def test_an_uncommitted_settle_and_the_abort_settle_after_it_read_the_same_progress(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path, journal_cls=FaultyJournal)
        journal = ledger.journal
        assert isinstance(journal, FaultyJournal)

        async def execute(args: NArgs, api: ToolExecutionApi) -> bytes:
            api.output("out ")
            api.diagnostic("w")
            api.usage(tokens=1)
            journal.refuse = {"call_settle"}
            return b"last"

        harness.register(ToolRegistration("t", NArgs, execute))
        with pytest.raises(JournalError):
            await harness.call("t", {}, call_id="c1")
        assert harness.running_calls() == ["c1"]  # the board keeps the call until its settle commits
        journal.refuse = set()
        harness.abort("c1")
        assert harness.running_calls() == []
        (entry,) = [e for e in ledger.trees.entries.values() if e.kind == "tool_result"]
        assert entry.content["status"] == "cancelled"
        assert entry.content["output"]["text"] == "out last"
        assert entry.content["warnings"] == ["w"]
        assert entry.content["usage"] == {"tokens": 1}
        ledger.close()

    asyncio.run(scenario())


def test_cancelling_the_awaiting_task_settles_the_call_then_reraises(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path)
        gate = asyncio.Event()
        started = asyncio.Event()
        harness.register(gate_tool("t", gate, 2, started))
        call = asyncio.ensure_future(harness.call("t", {}, call_id="c1"))
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert ledger.trees.state().slots["c1"].outcome == "cancelled"
        ledger.close()

    asyncio.run(scenario())


def test_a_failing_tool_settles_as_failed_with_its_error_as_the_last_warning(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, ledger = make_harness(tmp_path)

        async def execute(args: NArgs, api: ToolExecutionApi) -> None:
            api.output("partial")
            raise RuntimeError("boom")

        harness.register(ToolRegistration("t", NArgs, execute))
        result = await harness.call("t", {})
        assert result.status == "failed"
        assert result.warnings == ("RuntimeError: boom",)
        assert result.output.text == "partial"
        with pytest.raises(UnknownToolError):
            await harness.call("nope", {})
        with pytest.raises(InputError) as mistyped:
            await harness.call("t", {"n": "one"})
        assert (mistyped.value.code, mistyped.value.field) == ("bad_tool_arguments", "n")
        with pytest.raises(InputError) as unknown:
            await harness.call("t", {"m": 1})
        assert (unknown.value.code, unknown.value.field) == ("bad_tool_arguments", "m")
        assert len(ledger.commits) == 2
        ledger.close()

    asyncio.run(scenario())


def test_reporting_for_resolves_a_calls_truncation_in_one_place(tmp_path: Path) -> None:
    async def scenario() -> None:
        small = On(OutputLimits(10, 100, Keep.TAIL))
        harness, ledger = make_harness(tmp_path, truncation=small)
        seen: list[Any] = []

        async def execute(args: NArgs, api: ToolExecutionApi) -> bytes:
            seen.append(api.truncation)
            return b"0123456789" * 10

        own = ToolRegistration("own", NArgs, execute, truncation=Off())
        inherit = ToolRegistration("inherit", NArgs, execute)
        assert reporting_for(own, small) == Off()
        assert reporting_for(inherit, small) == small
        harness.register(own)
        harness.register(inherit)
        whole = await harness.call("own", {})
        bounded = await harness.call("inherit", {})
        assert seen == [Off(), small]
        assert whole.output.text == "0123456789" * 10  # Off: the final result is not truncated
        assert whole.output.bytes_dropped == 0
        assert bounded.output.bytes_kept + bounded.output.bytes_dropped == 100
        assert bounded.output.bytes_kept <= 10
        ledger.close()

    asyncio.run(scenario())
