"""docs/mcp.md gives every tool with its input schema as generated from the records, and each tool's description;
its generated regions (the summary table, each tool's description and schema) equal what `tools.mcp_doc` makes of
the tool table."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from eukhe.mcp.tools import TOOLS
from tools import mcp_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def sections() -> dict[str, str]:
    """Each `### \\`tool\\`` section of the page, by tool name."""
    text = DOC.read_text()
    found = re.findall(r"^### `([a-z_]+)`\n(.*?)(?=^##)", text, re.S | re.M)
    return dict(found)


def test_the_page_gives_every_tool_with_its_generated_schema_and_description() -> None:
    documented = sections()
    assert list(documented) == list(TOOLS)
    for name, body in documented.items():
        listing = TOOLS[name].listing()
        block = re.search(r"Input schema:\n\n```json\n(.*?)\n```", body, re.S)
        assert block is not None, name
        assert json.loads(block.group(1)) == listing.input_schema, f"regenerate the schema of {name} in docs/mcp.md"
        assert listing.description in body, f"the description of {name} in docs/mcp.md is not the tool's"


def test_the_generated_regions_of_the_page_are_up_to_date() -> None:
    page = DOC.read_text()
    assert mcp_doc.update(page) == page, (
        f"docs/mcp.md is out of date with eukhe/mcp/tools.py: run `{mcp_doc.REGENERATE}`"
    )
    assert mcp_doc.main(["--check"]) == 0


def test_a_hand_edited_description_is_drift_and_the_generator_restores_it() -> None:
    page = DOC.read_text()
    description = TOOLS["jobs_list"].description
    planted = page.replace(description, description.replace("running or ended", "running"), 1)
    assert planted != page
    assert mcp_doc.update(planted) == page


def test_a_changed_tool_table_is_drift() -> None:
    page = DOC.read_text()
    changed = dict(TOOLS)
    bash = TOOLS["bash"]
    changed["bash"] = dataclasses.replace(
        bash, description="Run a command.", call=dataclasses.replace(bash.call, op="bash.run")
    )
    fresh = mcp_doc.update(page, changed)
    assert fresh != page
    assert "Run a command.\n\nInput schema:" in fresh
    assert "| `bash` | `bash.run` |" in fresh


def test_a_tool_without_its_section_or_a_section_without_its_tool_is_refused() -> None:
    page = DOC.read_text()
    fewer = {name: tool for name, tool in TOOLS.items() if name != "glob"}
    with pytest.raises(mcp_doc.PageError, match=r"unknown \['glob'\]"):
        mcp_doc.update(page, fewer)
    unmarked = re.sub(r"<!-- tool glob:begin.*?<!-- tool glob:end -->\n", "", page, flags=re.S)
    with pytest.raises(mcp_doc.PageError, match=r"missing \['glob'\]"):
        mcp_doc.update(unmarked)
    with pytest.raises(mcp_doc.PageError, match="one <!-- tools:begin -->"):
        mcp_doc.update(page.replace("<!-- tools:end -->", ""))
