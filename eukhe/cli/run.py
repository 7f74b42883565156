"""`eukhe run`: run one command with its output bounded, print the window and the notice."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from eukhe.cli.common import emit_json, non_negative_int
from eukhe.core.bound import DEFAULT_LIMITS, Keep, Off, On, OutputLimits, Truncation
from eukhe.errors import UsageError
from eukhe.paths import agent_dir
from eukhe.records.cli import RunAnswer
from eukhe.runner import RunResult, run_bounded


def register(subparsers: Any) -> None:
    """Add `eukhe run` to the parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a command with bounded output",
        description="Run CMD with stdout and stderr merged, keep a bounded window of its output, and exit with "
        "its exit code. Past the limits, the full output goes to an artifact file named in the notice (past the "
        "user setting artifact_max_bytes, its head and tail).",
    )
    parser.add_argument("--max-bytes", type=non_negative_int, help=f"bytes kept (default {DEFAULT_LIMITS.max_bytes})")
    parser.add_argument("--max-lines", type=non_negative_int, help=f"lines kept (default {DEFAULT_LIMITS.max_lines})")
    ends = parser.add_mutually_exclusive_group()
    ends.add_argument("--head", action="store_true", help="keep the first lines")
    ends.add_argument("--tail", action="store_true", help="keep the last lines (default)")
    parser.add_argument("--no-truncation", action="store_true", help="keep every byte; no artifact")
    parser.add_argument("--artifact-dir", type=Path, help="where full outputs go (default <agent dir>/artifacts)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    parser.set_defaults(handler=handle)


def truncation_from(args: argparse.Namespace) -> Truncation:
    """The Truncation the flags ask for."""
    limited = args.max_bytes is not None or args.max_lines is not None or args.head or args.tail
    if args.no_truncation:
        if limited:
            raise UsageError(
                "eukhe run: --no-truncation cannot be combined with --max-bytes, --max-lines, --head or --tail"
            )
        return Off()
    return On(
        OutputLimits(
            DEFAULT_LIMITS.max_bytes if args.max_bytes is None else args.max_bytes,
            DEFAULT_LIMITS.max_lines if args.max_lines is None else args.max_lines,
            Keep.HEAD if args.head else Keep.TAIL,
        )
    )


def handle(args: argparse.Namespace) -> int:
    """Run the command and print its bounded output."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("eukhe run: no command given (usage: eukhe run [OPTIONS] -- CMD [ARGS...])")
    truncation = truncation_from(args)
    artifact_dir = args.artifact_dir if args.artifact_dir is not None else agent_dir() / "artifacts"
    from eukhe.session.settings import load_artifact_max_bytes  # noqa: PLC0415 - only `eukhe run` reads it

    result = run_bounded(command, truncation, artifact_dir, load_artifact_max_bytes())
    if args.json:
        emit_json(answer_of(result).to_json())
    else:
        print_human(result, isinstance(truncation, On) and truncation.limits.keep is Keep.HEAD)
    return result.exit_code


def answer_of(result: RunResult) -> RunAnswer:
    """The `eukhe run --json` record."""
    return RunAnswer(
        exit_code=result.exit_code,
        signal=result.signal,
        stopped_reading=result.stopped_reading,
        output=result.output.to_record(),
    )


def print_human(result: RunResult, head: bool) -> None:
    """The window as raw bytes, with the notice on its own line where output was dropped: after a head's window;
    before a tail's window, and once more on stderr after it, so that on a terminal the notice (the counts and the
    full output's path) is also the last line, not one a long window scrolled away."""
    out = sys.stdout.buffer
    notice = result.output.notice
    if notice is not None and not head:
        out.write(notice.encode() + b"\n")
    out.write(result.output.text)
    if notice is not None and head:
        if result.output.text and not result.output.text.endswith(b"\n"):
            out.write(b"\n")
        out.write(notice.encode() + b"\n")
    out.flush()
    if notice is not None and not head:
        unended = result.output.text and not result.output.text.endswith(b"\n")
        sys.stderr.write(("\n" if unended and sys.stderr.isatty() else "") + f"eukhe: {notice}\n")
    if result.output.artifact_error:
        sys.stderr.write(f"eukhe: warning: {result.output.artifact_error}\n")
    if result.stopped_reading:
        sys.stderr.write(
            "eukhe: warning: the command exited but a background process still holds its output; stopped reading\n"
        )
