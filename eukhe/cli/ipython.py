"""`eukhe ipython --session ID [--budget-ms N] [-c CODE | FILE | -]`: run a Python cell on a session's kernel.

It blocks at most the budget (the session's `tool_blocking_budget_ms`, lowered by --budget-ms): the cell settles
(--json: `status: settled`, `outcome`, `result`, `error`, and its images as `displays`: MIME type, size, artifact) or
detaches into a job (`status: detached`, `job`) with its output so far (`output`), and goes on in the daemon. Ctrl-C
interrupts the cell (a second one leaves at once).
"""

from __future__ import annotations

import argparse
import sys

from eukhe.cli.bash import blocking_call, print_notices, print_refusal, print_window, refusal_hint, say_detached
from eukhe.cli.common import emit_json, emit_text, non_negative_int
from eukhe.cli.daemon import add_daemon_options
from eukhe.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any

EXIT_BY_OUTCOME = {"ok": 0, "interrupted": 130, "killed": 137}


def cell_source(args: argparse.Namespace) -> str:
    """The cell: `-c CODE`, a FILE, or `-` for standard input (exactly one)."""
    if args.code is not None and args.file is not None:
        raise UsageError("eukhe ipython: give -c CODE or a FILE, not both")
    if args.code is not None:
        return str(args.code)
    if args.file is None:
        raise UsageError("eukhe ipython: give -c CODE, a FILE, or - for standard input")
    if args.file == "-":
        return sys.stdin.read()
    try:
        with open(args.file, encoding="utf-8") as source:  # open, not pathlib: CLI start-up time
            return source.read()
    except OSError as exc:
        raise UsageError(f"eukhe ipython: cannot read {args.file}: {exc.strerror or exc}") from exc


def cmd_ipython(args: argparse.Namespace) -> int:
    """Run the cell; print the answer (--json) or its output, result and traceback."""
    payload: dict[str, Any] = {"session": args.session, "code": cell_source(args)}
    if args.budget_ms is not None:
        payload["budget_ms"] = args.budget_ms
    reply = blocking_call(args, "ipython", payload, "running a Python cell")
    # The records are imported once the answer is here, not before the request: the cell reaches its kernel without
    # waiting for msgspec's import (a kernel idle past its timeout is culled meanwhile; tests/real/test_upkeep.py).
    from eukhe.daemon.replies import answer_as  # noqa: PLC0415
    from eukhe.records.jobs import CallAnswer, Detached  # noqa: PLC0415  (lazy: CLI start-up time)

    union: Any = CallAnswer  # a union of records: msgspec reads it, `type[T]` cannot name it
    result: CallAnswer = answer_as(reply, union)
    if args.json:
        emit_json(result.to_json())
        return 0
    print_window(result.output.text, result.output.notice)
    print_notices(result.notices)
    if isinstance(result, Detached):
        say_detached(args.session, result.job, result.budget_ms)
        return 0
    if result.result is not None:
        emit_text(f"{result.result}\n")
    if result.displays or result.displays_notice:
        from eukhe.calls.texts import display_lines  # noqa: PLC0415  (lazy: CLI start-up time)

        emit_text("".join(line + "\n" for line in display_lines(result)))
    error = result.error
    if error:
        trace = "".join(error.traceback) or f"{error.ename}: {error.evalue}\n"
        emit_text(trace if trace.endswith("\n") else trace + "\n", sys.stderr)
    print_refusal(refusal_hint(result))
    return EXIT_BY_OUTCOME.get(str(result.outcome), 1)


def register(subparsers: Any) -> None:
    """Add `eukhe ipython` to the parser."""
    parser = subparsers.add_parser("ipython", help="run a Python cell on a session's kernel (detaches past the budget)")
    parser.add_argument("--session", required=True, help="the session id")
    parser.add_argument(
        "--budget-ms", type=non_negative_int, help="block at most this long (within the session budget)"
    )
    parser.add_argument("-c", dest="code", metavar="CODE", help="the cell's code")
    parser.add_argument("file", nargs="?", metavar="FILE", help="a file holding the cell, or - for standard input")
    add_daemon_options(parser)
    parser.set_defaults(handler=cmd_ipython)
