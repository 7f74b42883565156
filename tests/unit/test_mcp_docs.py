"""docs/mcp.md gives every tool with its input schema as generated from the records, and each tool's description."""

from __future__ import annotations

import json
import re
from pathlib import Path

from eukhe.mcp.tools import TOOLS

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
