"""`eukhe tree navigate|fork --session ID ENTRY|none`: rewind a session, stopping the jobs started after the target.

--json keys: `stopped_jobs` (ended within the budget), `stopping_jobs` (killed, not yet ended), `leaf`, and
`session` (for a fork the new session, with `parent` the old one; the fork goes on in the same worker).
"""

from __future__ import annotations

import argparse

from eukhe.cli.common import emit_json, emit_text
from eukhe.cli.daemon import add_daemon_options, call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any


def _rewind(args: argparse.Namespace, op: str) -> int:
    entry = None if args.entry == "none" else args.entry  # the word none: before every entry
    from eukhe.records.jobs import Rewound  # noqa: PLC0415  (lazy: CLI start-up time)

    result = call(args, op, {"session": args.session, "entry": entry}, wait_label="stopping jobs", answer=Rewound)
    if args.json:
        emit_json(result.to_json())
        return 0
    if op == "tree.fork":
        emit_text(f"forked: new session {result.session} at {args.entry}\n")
    else:
        emit_text(f"leaf is now {args.entry}\n")
    emit_text(f"stopped jobs: {' '.join(result.stopped_jobs) or '-'}\n")
    emit_text(f"still stopping: {' '.join(result.stopping_jobs) or '-'}\n")
    return 0


def cmd_navigate(args: argparse.Namespace) -> int:
    """Move the session's leaf to ENTRY (none: before every entry)."""
    return _rewind(args, "tree.navigate")


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork a new session holding the branch up to ENTRY (none: empty)."""
    return _rewind(args, "tree.fork")


def register(subparsers: Any) -> None:
    """Add `eukhe tree ...` to the parser."""
    tree = subparsers.add_parser("tree", help="rewind a session: navigate to or fork at an entry")
    commands = tree.add_subparsers(dest="tree_command", required=True, parser_class=type(tree))
    for name, handler, text in (
        ("navigate", cmd_navigate, "move the leaf to ENTRY (none: before every entry); stops later jobs"),
        ("fork", cmd_fork, "fork a new session at ENTRY (none: before every entry); stops later jobs"),
    ):
        parser = commands.add_parser(name, help=text)
        parser.add_argument("--session", required=True, help="the session id")
        parser.add_argument("entry", metavar="ENTRY|none")
        add_daemon_options(parser)
        parser.set_defaults(handler=handler)
