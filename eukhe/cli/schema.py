"""`eukhe schema [NAME] [--json]`: the JSON Schema of every daemon request and answer, generated from the records.

Without NAME: every op (a list of ops and what they do, or with --json the whole document). With NAME: that op's
`args`, `answer` and `events` schemas. The MCP tools reuse the same schemas.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from eukhe.cli.common import emit_json, emit_text
from eukhe.records.schema import op_schemas


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the schemas."""
    document = op_schemas(None if args.name is None else [args.name])
    if args.json:
        emit_json(document)
    elif args.name is None:
        for name, op in document["ops"].items():
            emit_text(f"{name:15} {op['scope']:10} {op['summary']}\n")
        emit_text("`eukhe schema NAME` shows one op's schemas; --json prints them all as one document\n")
    else:
        emit_text(json.dumps(document, indent=2) + "\n")
    return 0


def register(subparsers: Any) -> None:
    """Add `eukhe schema` to the parser."""
    parser = subparsers.add_parser("schema", help="the JSON Schema of every daemon request and answer")
    parser.add_argument("name", nargs="?", metavar="NAME", help="one op (e.g. bash, jobs.wait)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=cmd_schema)
