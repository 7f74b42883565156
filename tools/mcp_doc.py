"""The generated parts of docs/mcp.md, from the tool table (`eukhe.mcp.tools.TOOLS`).

Two kinds of region, each between HTML comment markers that the page keeps: the summary table of every tool
(`<!-- tools:begin -->` ... `<!-- tools:end -->`), and in each tool's own section its description and input
schema (`<!-- tool NAME:begin -->` ... `<!-- tool NAME:end -->`). What lies outside the markers (what each
answer holds and guarantees) is written by hand. `python -m tools.mcp_doc` rewrites the regions;
`--check` exits 1 when the page differs from what the table gives (tests/unit/test_mcp_docs.py runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types as pytypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eukhe.mcp.tools import TOOLS, Tool

PAGE = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"
REGENERATE = "python3 -m uv run python -m tools.mcp_doc"

TABLE = re.compile(r"(<!-- tools:begin[^>]*-->\n)(.*?)(<!-- tools:end -->)", re.S)
SECTION = re.compile(r"(<!-- tool ([a-z_]+):begin[^>]*-->\n)(.*?)(<!-- tool \2:end -->)", re.S)


class PageError(ValueError):
    """The page's markers do not match the tool table (a region missing, unknown, doubled or out of order)."""


def answer_name(kind: Any) -> str:
    """The answer record's name as a table cell writes it (`Settled` or `Detached` for a union)."""
    if isinstance(kind, pytypes.UnionType):
        return " or ".join(answer_name(member) for member in kind.__args__)
    return f"`{getattr(kind, '__name__', kind)}`"


def hints(tool: Tool) -> str:
    """The client hints the tool sets, as MCP names them: a true one by its name, a false one with `: false`."""
    set_hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    return ", ".join(f"`{name}`" if value else f"`{name}: false`" for name, value in set_hints.items())


def summary(tools: Mapping[str, Tool]) -> str:
    """The table of every tool: its daemon op, arguments, answer record, hints and progress."""
    rows = [
        "| tool | daemon op | arguments | answer | client hints | progress |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for tool in tools.values():
        listing = tool.listing()
        arguments = ", ".join(f"`{name}`" for name in listing.input_schema.get("properties", {})) or "none"
        progress = {"job": "its job's output", "children": "children ended", None: "none"}[tool.progress]
        rows.append(
            f"| `{tool.name}` | `{tool.op}` | {arguments} | {answer_name(tool.answer)} | {hints(tool)} | {progress} |"
        )
    return "\n".join(rows) + "\n"


def section(tool: Tool) -> str:
    """A tool's description and input schema, as `tools/list` gives them."""
    listing = tool.listing()
    schema = json.dumps(listing.input_schema, indent=2, ensure_ascii=False)
    return f"{listing.description}\n\nInput schema:\n\n```json\n{schema}\n```\n"


def update(page: str, tools: Mapping[str, Tool] = TOOLS) -> str:
    """The page with every generated region rewritten from `tools`; PageError when the markers do not match."""
    tables = TABLE.findall(page)
    if len(tables) != 1:
        raise PageError(f"the page needs one <!-- tools:begin --> ... <!-- tools:end --> region, not {len(tables)}")
    named = [match.group(2) for match in SECTION.finditer(page)]
    if named != list(tools):
        missing = [name for name in tools if name not in named]
        unknown = [name for name in named if name not in tools]
        raise PageError(
            "the page's tool sections differ from the tool table: "
            f"missing {missing}, unknown {unknown}, page order {named}, table order {list(tools)}; "
            "give each tool a section with its markers, in the table's order"
        )
    page = TABLE.sub(lambda match: match.group(1) + summary(tools) + match.group(3), page)
    return SECTION.sub(lambda match: match.group(1) + section(tools[match.group(2)]) + match.group(4), page)


def main(argv: list[str] | None = None) -> int:
    """Rewrite docs/mcp.md's generated regions, or with --check report whether they are out of date."""
    parser = argparse.ArgumentParser(prog="python -m tools.mcp_doc", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the page is out of date")
    parser.add_argument("--page", type=Path, default=PAGE)
    options = parser.parse_args(argv)
    text = options.page.read_text()
    try:
        fresh = update(text)
    except PageError as error:
        print(f"{options.page}: {error}", file=sys.stderr)
        return 1
    if fresh == text:
        return 0
    if options.check:
        print(f"{options.page} is out of date with eukhe/mcp/tools.py: run `{REGENERATE}`", file=sys.stderr)
        return 1
    options.page.write_text(fresh)
    print(f"wrote {options.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
