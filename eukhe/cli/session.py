"""`eukhe session create|list|show|calls|network|close|delete`: sessions hosted by the daemon.

--json keys scripts rely on: `create` -> `id`; `list` -> `sessions` (each with `id`); `show` -> `entries` (each with
`id`, `parent`, `kind`) and `leaf`; `calls` -> `calls` (each with `call`, `tool`, `status`) and, with `--call`,
`settle`; `network` -> `network`, `attempts` (each with `name`, `port`, `kind`, `verdict`, `sent`, `received`);
`close` -> `session`, `was_open`; `delete` -> `session`, `was_open`, `removed`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from eukhe.cli.common import add_sandbox_options, emit_json, emit_text, sandbox_args, sandbox_line
from eukhe.cli.daemon import add_daemon_options, call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any


def cmd_create(args: argparse.Namespace) -> int:
    """Create a session in an explicit working directory."""
    # The daemon runs elsewhere: a relative directory is taken relative to this shell's. "" stays "" (refused).
    cwd = os.path.abspath(args.cwd) if args.cwd else args.cwd
    from eukhe.records.daemon import SessionCreated  # noqa: PLC0415  (lazy: CLI start-up time)

    result = call(args, "session.create", {"cwd": cwd, **sandbox_args(args)}, answer=SessionCreated)
    for notice in result.notices:
        emit_text(f"eukhe: {notice}\n", sys.stderr)
    if args.json:
        emit_json(result.to_json())
    else:
        emit_text(f"{result.id}\n")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """List the saved sessions."""
    from eukhe.records.daemon import SessionList  # noqa: PLC0415  (lazy: CLI start-up time)

    result = call(args, "session.list", answer=SessionList)
    if args.json:
        emit_json(result.to_json())
    else:
        for session in result.sessions:
            state = "open" if session.open else "closed"
            emit_text(f"{session.id}  {state:6}  {session.cwd}\n")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Show a session's entry tree and its current leaf."""
    from eukhe.records.daemon import SessionShow  # noqa: PLC0415  (lazy: CLI start-up time)

    result = call(args, "session.show", {"session": args.id}, answer=SessionShow)
    if args.json:
        emit_json(result.to_json())
        return 0
    emit_text(f"session {args.id} in {result.cwd}, leaf {result.leaf}\n")
    transport = result.kernel_transport
    if transport:
        emit_text(f"kernel transport: wrapped by {' '.join(transport.argv_prefix)} (python {transport.python})\n")
    else:
        emit_text("kernel transport: local\n")
    if result.sandbox:
        emit_text(sandbox_line(result.sandbox) + "\n")
    for entry in result.entries:
        marker = "*" if entry.id == result.leaf else " "
        emit_text(f" {marker} {entry.id}  parent {entry.parent}  {entry.kind}  {summary(entry.content)}\n")
    return 0


def cmd_calls(args: argparse.Namespace) -> int:
    """List a session's tool calls (a model's, journaled), or print one call's settle whole (`--call`)."""
    from eukhe.records.daemon import CallList  # noqa: PLC0415  (lazy: CLI start-up time)

    result = call(args, "session.calls", {"session": args.id, "call": args.call}, answer=CallList)
    if args.json:
        emit_json(result.to_json())
        return 0
    if args.call is not None:
        if result.settle is None:
            emit_text(f"call {args.call} is still running: no settle yet\n")
        else:
            emit_text(json.dumps(result.settle, indent=2, ensure_ascii=False) + "\n")
        return 0
    if not result.calls:
        emit_text(f"session {args.id} has no tool calls\n")
    for row in result.calls:
        status = row.status if row.outcome != "failed" else "failed"
        emit_text(f"{row.call}  {row.tool:11} {status:11} {when(row.started_ms)}  {row.args}\n")
        if row.summary:
            emit_text(f"    -> {row.summary}\n")
    return 0


def cmd_network(args: argparse.Namespace) -> int:
    """List the connections a session's network allowlist saw (its proxy's record)."""
    from eukhe.records.network import NetworkLog  # noqa: PLC0415  (lazy: CLI start-up time)

    result = call(args, "session.network", {"session": args.id}, answer=NetworkLog)
    if args.json:
        emit_json(result.to_json())
        return 0
    if result.network != "allowlist":
        emit_text(f"session {args.id}: the network is {result.network}: no proxy, no record of connections\n")
        return 0
    if not result.attempts:
        emit_text(f"session {args.id}: no connection through the proxy yet\n")
    for row in result.attempts:
        what = f"{row.kind} {row.method}" if row.method else row.kind
        where = f"{row.name}:{row.port}" if row.name is not None else "?"
        line = f"{when(row.started_ms)}  {row.verdict:8} {what:12} {where}  sent {row.sent} received {row.received}"
        line += f"  {row.duration_ms} ms" + (f"  ({row.detail})" if row.detail else "")
        emit_text(line + "\n")
    return 0


def when(ms: int | None) -> str:
    """A wall-clock time in ms since the epoch, as the local time of day."""
    if ms is None:
        return "--:--:--"
    import time  # noqa: PLC0415  (lazy: CLI start-up time)

    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def cmd_close(args: argparse.Namespace) -> int:
    """Stop a session's worker (its kernel and jobs end); refused while jobs run unless --force."""
    from eukhe.records.daemon import SessionClosed  # noqa: PLC0415  (lazy: CLI start-up time)

    payload = {"session": args.id, "force": args.force}
    result = call(args, "session.close", payload, wait_label="closing the session", answer=SessionClosed)
    if args.json:
        emit_json(result.to_json())
    else:
        emit_text(f"session {args.id} {'closed' if result.was_open else 'was not open'}\n")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Remove a session: its directory, artifacts and workspaces (its worker is stopped first); refused while jobs
    run unless --force."""
    from eukhe.records.daemon import SessionDeleted  # noqa: PLC0415  (lazy: CLI start-up time)

    payload = {"session": args.id, "force": args.force}
    result = call(args, "session.delete", payload, wait_label="deleting the session", answer=SessionDeleted)
    if args.json:
        emit_json(result.to_json())
    else:
        emit_text(f"session {args.id} deleted\n" + "".join(f"  removed {path}\n" for path in result.removed))
    return 0


def summary(content: Any) -> str:
    """One short line for an entry's content (a bash row: its command and end)."""
    if isinstance(content, dict) and "command" in content:
        end = "killed" if content.get("killed") else f"exit {content.get('exit_code')}"
        return f"bash: {content['command']} ({end})"
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def register(subparsers: Any) -> None:
    """Add `eukhe session ...` to the parser."""
    session = subparsers.add_parser(
        "session", help="create, list, show, close or delete daemon-hosted sessions; list their tool calls"
    )
    commands = session.add_subparsers(dest="session_command", required=True, parser_class=type(session))
    create = commands.add_parser("create", help="create a session (prints its id)")
    create.add_argument("--cwd", required=True, help="the session's working directory (must exist)")
    add_sandbox_options(create)
    create.set_defaults(handler=cmd_create)
    listing = commands.add_parser("list", help="list saved sessions")
    listing.set_defaults(handler=cmd_list)
    show = commands.add_parser("show", help="show a session's entry tree and leaf")
    show.add_argument("id")
    show.set_defaults(handler=cmd_show)
    calls = commands.add_parser("calls", help="list a session's tool calls (a model's, journaled), or one's settle")
    calls.add_argument("id")
    calls.add_argument("--call", metavar="CALL_ID", help="print this call's settle whole (its tool_result entry)")
    calls.set_defaults(handler=cmd_calls)
    network = commands.add_parser("network", help="list the connections a session's network allowlist saw")
    network.add_argument("id")
    network.set_defaults(handler=cmd_network)
    close = commands.add_parser("close", help="stop a session's worker, kernel and jobs (the session stays)")
    close.add_argument("id")
    close.add_argument("--force", action="store_true", help="kill running jobs (else a close is refused)")
    close.set_defaults(handler=cmd_close)
    delete = commands.add_parser("delete", help="remove a session, its artifacts and workspaces (stops its worker)")
    delete.add_argument("id")
    delete.add_argument("--force", action="store_true", help="kill running jobs (else a delete is refused)")
    delete.set_defaults(handler=cmd_delete)
    for parser in (create, listing, show, calls, network, close, delete):
        add_daemon_options(parser)
