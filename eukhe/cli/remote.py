"""`eukhe remote list|call --session ID ...`: a session kernel's `@rlm.remote` functions (spec S3 "@remote").

`list` shows each function's name, docstring and the JSON Schema of its keyword arguments (--json: `{"functions":
[{name, tool, doc, schema, module, qualname}]}`). `call NAME --args JSON` calls one and answers `{"result": ...}`
(or `{"output": {...}}`, the result's JSON text bounded by the session's limits, when it passes them) or
`{"error": {"kind", "message", "reason"}}` with exit 1; `kind` is `not_running`, `unreachable`, `unknown`,
`timeout` or `failed` (docs/remote.md).
"""

from __future__ import annotations

import argparse
import json
import sys

from eukhe.cli.bash import print_window
from eukhe.cli.common import EXIT_ERROR, emit_json, emit_text, non_negative_int
from eukhe.cli.daemon import add_daemon_options, call
from eukhe.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any


def cmd_list(args: argparse.Namespace) -> int:
    """List the running kernel's remote functions with their schemas."""
    from eukhe.records.remote import RemoteList  # noqa: PLC0415  (lazy: CLI start-up time)

    answer = call(args, "remote.list", {"session": args.session}, answer=RemoteList)
    if args.json:
        emit_json(answer.to_json())
        return 0
    for function in answer.functions:
        doc = (function.doc or "").strip().splitlines()
        emit_text(f"{function.name}" + (f": {doc[0]}" if doc else "") + "\n")
        emit_text(f"  {json.dumps(function.schema, ensure_ascii=False, separators=(',', ':'))}\n")
    return 0


def _arguments(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as error:
        raise UsageError(f"eukhe remote call: --args is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise UsageError("eukhe remote call: --args must be a JSON object of keyword arguments")
    return value


def cmd_call(args: argparse.Namespace) -> int:
    """Call one remote function; its result, or its typed error (exit 1)."""
    payload: dict[str, Any] = {"session": args.session, "name": args.name, "args": _arguments(args.args)}
    if args.budget_ms is not None:
        payload["budget_ms"] = args.budget_ms
    from msgspec import UnsetType  # noqa: PLC0415  (lazy: CLI start-up time)

    from eukhe.records.remote import RemoteCallAnswer  # noqa: PLC0415

    label = f"calling remote function {args.name}"
    answer = call(args, "remote.call", payload, wait_label=label, answer=RemoteCallAnswer)
    error, output = answer.error, answer.output
    if args.json:
        emit_json(answer.to_json())
    elif not isinstance(error, UnsetType):
        how = error.kind + (f" ({error.reason})" if error.reason else "")
        emit_text(f"eukhe: remote {args.name}: {how}: {error.message}\n", sys.stderr)
    elif not isinstance(output, UnsetType):
        print_window(output.text, output.notice)
    else:
        emit_text(json.dumps(answer.result, ensure_ascii=False) + "\n")
    return 0 if isinstance(error, UnsetType) else EXIT_ERROR


def register(subparsers: Any) -> None:
    """Add `eukhe remote ...` to the parser."""
    remote = subparsers.add_parser("remote", help="list or call a session kernel's @rlm.remote functions")
    commands = remote.add_subparsers(dest="remote_command", required=True, parser_class=type(remote))
    listing = commands.add_parser("list", help="the kernel's remote functions: name, doc, schema")
    listing.set_defaults(handler=cmd_list)
    calling = commands.add_parser("call", help="call a remote function with keyword arguments")
    calling.add_argument("name", help="the function's name")
    calling.add_argument("--args", help='its keyword arguments as a JSON object, e.g. \'{"a": 2, "b": 3}\'')
    calling.add_argument(
        "--budget-ms", type=non_negative_int, help="wait at most this long (within the session budget)"
    )
    calling.set_defaults(handler=cmd_call)
    for parser in (listing, calling):
        parser.add_argument("--session", required=True, help="the session id")
        add_daemon_options(parser)
