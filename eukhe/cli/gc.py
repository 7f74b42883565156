"""`eukhe gc [--dry-run]`: apply the artifact retention policy now ("Bounded disk").

The daemon applies it at its start and every hour; this runs it now and says what it freed (`--dry-run`: what it
would free). --json: the daemon's `GcReport` (`removed`: each `{path, bytes, reason}`; `bytes_freed`, ...).
"""

from __future__ import annotations

import argparse

from eukhe.cli.common import emit_json, emit_text
from eukhe.cli.daemon import add_daemon_options, call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any


def cmd_gc(args: argparse.Namespace) -> int:
    """Apply the retention policy (or plan it) and print what was removed."""
    from eukhe.records.daemon import GcReport  # noqa: PLC0415  (lazy: CLI start-up time)

    report = call(args, "gc", {"dry_run": args.dry_run}, wait_label="collecting artifacts", answer=GcReport)
    if args.json:
        emit_json(report.to_json())
        return 0
    verb = "would remove" if report.dry_run else "removed"
    for removed in report.removed:
        emit_text(f"{verb} {removed.path} ({removed.bytes} bytes, {removed.reason})\n")
    freed = "would free" if report.dry_run else "freed"
    emit_text(
        f"{len(report.removed)} of {report.artifacts} artifacts, {freed} {report.bytes_freed} of"
        f" {report.bytes_before} bytes; kept {report.kept_pinned} named by a last answer and"
        f" {report.kept_being_written} being written (limits: {report.max_total_bytes} bytes,"
        f" {report.max_age_days:g} days)\n"
    )
    for error in report.errors:
        emit_text(f"could not remove {error}\n")
    return 0


def register(subparsers: Any) -> None:
    """Add `eukhe gc` to the parser."""
    parser = subparsers.add_parser("gc", help="apply the artifact retention policy now (the daemon does it hourly)")
    parser.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    add_daemon_options(parser)
    parser.set_defaults(handler=cmd_gc)
