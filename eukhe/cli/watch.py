"""`eukhe watch --session ID`: live progress of a session's running calls and jobs (S2 "A tool call" 2).

Prints each event as it comes (--json: one JSON object per line): first a snapshot of the running tool calls of every
client (each with its last progress), then one `tool_execution_update` per change (a call's job: its bytes, lines
and last output line so far; a `collect`: how many children ended), a `tool_execution_end` when a call settles, and
`job_update` when a job's output counters or state change. Runs until Ctrl-C, or until --max-events events were
printed.
"""

from __future__ import annotations

import argparse
import json
import sys

from eukhe.cli.common import emit_text, positive_int
from eukhe.cli.daemon import add_daemon_options, call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any


class _Enough(Exception):  # noqa: N818  (control flow, never escapes this module)
    """Raised from the event callback once --max-events events were printed."""


def format_event(event: dict[str, Any]) -> str:
    """One event as a line for a person."""
    kind = event.get("type")
    if kind == "snapshot":
        calls = event.get("calls", [])
        lines = [f"running calls: {len(calls)}"]
        lines += [f"  call {row.get('call')} ({row.get('tool')}): {_progress(row.get('progress'))}" for row in calls]
        return "\n".join(lines)
    if kind == "job_update":
        job = event["job"]
        end = (
            "" if job["status"] == "running" else (" killed" if job.get("killed") else f" exit {job.get('exit_code')}")
        )
        return f"job {job['id']} {job['status']}{end}: {job['bytes_kept']} bytes  {job['command']}"
    if kind == "tool_execution_update":
        return f"call {event.get('call')} ({event.get('tool')}): {_progress(event.get('progress'))}"
    if kind == "tool_execution_end":
        return f"call {event.get('call')} ({event.get('tool')}): {event.get('status')}"
    return json.dumps(event)


def _progress(progress: Any) -> str:
    """A call's published progress in words (its `CallLive` details), or that it published none yet."""
    details = progress.get("details") if isinstance(progress, dict) else None
    if not isinstance(details, dict) or "elapsed_ms" not in details:
        return "no progress yet"
    from eukhe.calls.texts import progress_message  # noqa: PLC0415  (lazy: CLI start-up time)
    from eukhe.records.base import convert  # noqa: PLC0415
    from eukhe.records.daemon import CallLive  # noqa: PLC0415

    live = convert(details, CallLive, code="daemon_protocol", what="a call's progress")
    return progress_message(live.elapsed_ms / 1000, live)


def cmd_watch(args: argparse.Namespace) -> int:
    """Stream the session's events until interrupted (or --max-events)."""
    printed = 0

    def on_event(event: Any) -> None:
        nonlocal printed
        line = json.dumps(event, ensure_ascii=False) if args.json else format_event(event)
        emit_text(line + "\n")
        sys.stdout.flush()
        printed += 1
        if args.max_events is not None and printed >= args.max_events:
            raise _Enough

    try:
        call(args, "watch", {"session": args.session}, on_event=on_event)
    except _Enough:
        return 0
    return 0


def register(subparsers: Any) -> None:
    """Add `eukhe watch` to the parser."""
    parser = subparsers.add_parser("watch", help="live progress of a session's running calls and jobs")
    parser.add_argument("--session", required=True, help="the session id")
    parser.add_argument("--max-events", type=positive_int, help="stop after this many events")
    add_daemon_options(parser)
    parser.set_defaults(handler=cmd_watch)
