"""`eukhe spawn` and `eukhe children list|collect|delete`: a daemon-hosted session's children.

A child is a session of its own (worker, kernel, jobs) whose run is CODE, one cell in its kernel, or `--prompt TEXT`,
worked on by a model with the child's own tools; `--isolated` gives it a copy of the parent's files, handed back path
by path at its end (docs/children.md). A prompt child's report has its `usage` and its `messages` to the parent.

--json: `spawn` -> the child's roster row (`name`, `session`, `status`, `workspace`, `cwd`, `handback`); `list` ->
`{"children": [...]}`; `collect` -> `{"reports": [...]}`, each `name`, `status`, `answer`, `error`, `handback`;
`delete` -> the child's last report.
"""

from __future__ import annotations

import argparse
import json
import sys

from eukhe.cli.common import emit_json, emit_text, non_negative_int
from eukhe.cli.daemon import add_daemon_options, call
from eukhe.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any

    from eukhe.records.children import ChildReport
    from eukhe.records.workspace import HandbackOutcome


def _code(args: argparse.Namespace) -> str:
    """The child's code: `-c CODE`, a FILE, or `-` for standard input (exactly one)."""
    if (args.code is None) == (args.file is None):
        raise UsageError("eukhe spawn: give the child's code as -c CODE, a FILE, or - for standard input (or --prompt)")
    if args.code is not None:
        return str(args.code)
    if args.file == "-":
        return sys.stdin.read()
    try:
        with open(args.file, encoding="utf-8") as source:
            return source.read()
    except OSError as error:
        raise UsageError(f"eukhe spawn: cannot read {args.file}: {error.strerror or error}") from error


def _handback_line(handback: HandbackOutcome | None) -> str:
    from eukhe.records.workspace import HandbackFailure  # noqa: PLC0415  (lazy: CLI start-up time)

    if handback is None:
        return ""
    if isinstance(handback, HandbackFailure):
        return f"  hand-back failed at {handback.path}: {handback.reason} (copy kept at {handback.copy})"
    taken, conflicts = len(handback.paths_taken), len(handback.conflicts)
    return f"  handed back: {taken} path(s) taken, {conflicts} conflict(s)"


def cmd_spawn(args: argparse.Namespace) -> int:
    """Start a child of the session: its code, or its prompt (with the API key this shell's environment holds, in
    the variable the `model` setting names: the daemon may have started before it was set)."""
    payload: dict[str, Any] = {
        "session": args.session,
        "name": args.name,
        "workspace": "isolated" if args.isolated else "shared",
        "timeout_ms": args.timeout_ms,
    }
    if args.prompt is not None:
        if args.code is not None or args.file is not None:
            raise UsageError("eukhe spawn: give the child's code (-c, a FILE, -) or --prompt, not both")
        from eukhe.session.settings import model_key_here  # noqa: PLC0415  (lazy: CLI start-up time)

        payload.update(prompt=args.prompt, model=args.model, api_key=model_key_here())
    else:
        if args.model is not None:
            raise UsageError("eukhe spawn: --model names the model of a --prompt child")
        payload["code"] = _code(args)
    from eukhe.records.children import ChildRow  # noqa: PLC0415  (lazy: CLI start-up time)

    row = call(args, "children.spawn", payload, answer=ChildRow)
    if args.json:
        emit_json(row.to_json())
    else:
        emit_text(f"{row.name}  {row.status}  session {row.session}  {row.workspace} in {row.cwd}\n")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The session's children."""
    from eukhe.records.children import Roster  # noqa: PLC0415  (lazy: CLI start-up time)

    roster = call(args, "children.list", {"session": args.session}, answer=Roster)
    if args.json:
        emit_json(roster.to_json())
        return 0
    for row in roster.children:
        handback = _handback_line(row.handback)
        emit_text(f"{row.name}  {row.status:9}  {row.session}  {row.workspace}{handback}\n")
    return 0


def _print_report(report: ChildReport) -> None:
    from eukhe.records.workspace import HandbackReport  # noqa: PLC0415  (lazy: CLI start-up time)

    emit_text(f"{report.name}: {report.status}\n")
    for message in report.messages:
        emit_text(f"  message: {message}\n")
    if report.answer is not None:
        emit_text(f"  answer: {json.dumps(report.answer, ensure_ascii=False)}\n")
    if report.error:
        emit_text(f"  error ({report.error.reason}): {report.error.message}\n")
    if report.usage is not None:
        used = report.usage
        emit_text(
            f"  usage: {used.total_tokens} tokens ({used.prompt_tokens} prompt, {used.completion_tokens} completion), "
            f"{used.model_calls} model calls, {used.tool_calls} tool calls\n"
        )
    handback = report.handback
    if handback:
        emit_text(_handback_line(handback) + "\n")
        for conflict in handback.conflicts if isinstance(handback, HandbackReport) else ():
            where = conflict.child_version or "(a removal)"
            emit_text(f"    conflict {conflict.path} ({conflict.reason}): the child's version is {where}\n")


def cmd_collect(args: argparse.Namespace) -> int:
    """Wait for children's ends (at most --timeout-ms and the session's budget); their reports."""
    payload = {"session": args.session, "names": args.names or None, "timeout_ms": args.timeout_ms}
    from eukhe.records.children import Reports  # noqa: PLC0415  (lazy: CLI start-up time)

    reports = call(args, "children.collect", payload, wait_label="waiting for the children", answer=Reports)
    if args.json:
        emit_json(reports.to_json())
        return 0
    for report in reports.reports:
        _print_report(report)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """End a child, hand it back and take it off the roster."""
    from eukhe.records.children import ChildReport  # noqa: PLC0415  (lazy: CLI start-up time)

    payload = {"session": args.session, "name": args.name}
    report = call(args, "children.delete", payload, wait_label="ending the child", answer=ChildReport)
    if args.json:
        emit_json(report.to_json())
    else:
        _print_report(report)
    return 0


def register(subparsers: Any) -> None:
    """Add `eukhe spawn` and `eukhe children ...` to the parser."""
    spawn = subparsers.add_parser(
        "spawn", help="start a child of a session: CODE as a cell in its own session, or a model on a --prompt"
    )
    spawn.add_argument("--name", required=True, help="the child's name (letters, digits, _.-; unique per parent)")
    spawn.add_argument("--isolated", action="store_true", help="work in a copy of the parent's files, handed back")
    spawn.add_argument("--timeout-ms", type=non_negative_int, help="stall the child past this many milliseconds")
    spawn.add_argument("-c", dest="code", help="the child's code")
    spawn.add_argument("file", nargs="?", help="a file with the child's code (- for standard input)")
    spawn.add_argument("--prompt", help="a task for a model (the user's `model` setting), instead of code")
    spawn.add_argument("--model", help="the model a --prompt child asks (default: the setting's name)")
    spawn.set_defaults(handler=cmd_spawn)
    children = subparsers.add_parser("children", help="list, collect or delete a session's children")
    commands = children.add_subparsers(dest="children_command", required=True, parser_class=type(children))
    listing = commands.add_parser("list", help="the session's children")
    listing.set_defaults(handler=cmd_list)
    collect = commands.add_parser("collect", help="wait for children's ends; their reports")
    collect.add_argument("names", nargs="*", help="the children to wait for (default: all)")
    collect.add_argument("--timeout-ms", type=non_negative_int)
    collect.set_defaults(handler=cmd_collect)
    delete = commands.add_parser("delete", help="end a child, hand it back, take it off the roster")
    delete.add_argument("name")
    delete.set_defaults(handler=cmd_delete)
    for parser in (spawn, listing, collect, delete):
        parser.add_argument("--session", required=True, help="the parent session's id")
        add_daemon_options(parser)
