"""The `dyn` entry (spec S3 "@remote" 2): dynamic tools are reached through it and never listed in the roster; a
`dyn` call is an ordinary call (two journal records, its output bounded by the call's Truncation)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from eukhe.core.bound import Keep, On, OutputLimits
from eukhe.errors import InputError
from eukhe.harness import DYN, DynamicTool, ToolExecutionApi
from eukhe.records.journal import CallSettle, CallStart
from eukhe.store.journal import read_journal
from tests.unit.test_harness_calls import make_harness


class Source:
    """Dynamic tools `remote/<name>` from a table, like a session's kernel functions."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.names = ["echo"]

    async def _echo(self, args: dict[str, Any], api: ToolExecutionApi) -> str:
        self.seen.append(args)
        return "x" * int(args.get("n", 1))

    def dynamic_tool(self, name: str) -> DynamicTool | None:
        plain = name.removeprefix("remote/")
        if plain == name or plain not in self.names:
            return None
        return DynamicTool(name, {"type": "object"}, self._echo, "echo n x's")

    def dynamic_tools(self) -> list[DynamicTool]:
        return [tool for name in self.names if (tool := self.dynamic_tool(f"remote/{name}")) is not None]


def test_dynamic_tools_are_reached_through_dyn_and_never_in_the_roster(tmp_path: Path) -> None:
    async def scenario() -> None:
        harness, _ = make_harness(tmp_path, On(OutputLimits(10, 5, Keep.HEAD)))
        source = Source()
        harness.add_dynamic(source)
        assert [tool.name for tool in harness.tools()] == [DYN]
        assert [tool.name for tool in harness.dynamic_tools()] == ["remote/echo"]
        assert harness.tools()[0].parameters["$defs"]["DynArgs"]["required"] == ["tool"]

        result = await harness.call(DYN, {"tool": "remote/echo", "args": {"n": 3}})
        assert (result.tool, result.status, result.output.text) == (DYN, "returned", "xxx")
        assert source.seen == [{"n": 3}]
        long = await harness.call(DYN, {"tool": "remote/echo", "args": {"n": 25}})
        assert (long.output.bytes_kept, long.output.bytes_dropped) == (10, 15)  # the call's bound, like any call
        records = [record for commit in read_journal(tmp_path / "main.jsonl").commits for record in commit.records]
        starts = [record for record in records if isinstance(record, CallStart)]
        settles = [record for record in records if isinstance(record, CallSettle)]
        assert [(r.tool, r.args) for r in starts][:1] == [(DYN, {"tool": "remote/echo", "args": {"n": 3}})]
        assert len(starts) == len(settles) == 2

        missing = await harness.call(DYN, {"tool": "remote/gone"})
        assert missing.status == "failed" and missing.warnings == ("UnknownToolError: no tool named 'remote/gone'",)
        with pytest.raises(InputError) as bad:
            await harness.call(DYN, {"tool": "remote/echo", "Args": {}})
        assert (bad.value.code, bad.value.field, bad.value.hint) == ("bad_tool_arguments", "Args", "args")

    asyncio.run(scenario())
