"""`eukhe run`: run one command with its output bounded (issue 2; filled in by the bound work)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add `eukhe run` to the parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser("run", help="run a command with bounded output")
    parser.set_defaults(handler=lambda args: 0)
