"""`eukhe fs read|write|edit|grep|glob --session ID ...`: the file tools on a session's working directory.

The same handlers as a cell's `rlm.fs` and the Python API's `session.files`: answers are bounded by the session's
output limits (the notice and the artifact like every output); a refusal is `fs_error` with its `reason` in
`details` (--json). Relative paths are taken against this shell's directory, as any command's would be.
"""

from __future__ import annotations

import argparse
import os
import sys

from eukhe.cli.bash import print_window
from eukhe.cli.common import emit_json, emit_text, positive_int
from eukhe.cli.daemon import add_daemon_options, call
from eukhe.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any

    from eukhe.records.fs import EditAnswer, GlobAnswer, GrepAnswer, ReadAnswer, WriteAnswer


def _here(path: str) -> str:
    """A path as this shell means it (the session runs elsewhere): relative ones against this directory."""
    return path if os.path.isabs(path) or path.startswith("~") else os.path.abspath(path)


def _text_from(args: argparse.Namespace, what: str) -> str:
    """The text of `--content TEXT`, a FILE or `-` (standard input): exactly one."""
    given = [value for value in (args.content, args.source) if value is not None]
    if len(given) != 1:
        ways = "--content TEXT, a FILE" if args.fs_command == "write" else "a FILE"
        raise UsageError(f"eukhe fs {args.fs_command}: give the {what} as {ways} or - for standard input")
    if args.content is not None:
        return str(args.content)
    if args.source == "-":
        return sys.stdin.read()
    try:
        with open(args.source, encoding="utf-8") as source:
            return source.read()
    except OSError as error:
        raise UsageError(f"eukhe fs {args.fs_command}: cannot read {args.source}: {error.strerror or error}") from error


def _show(args: argparse.Namespace, answer: ReadAnswer | WriteAnswer | EditAnswer | GrepAnswer | GlobAnswer) -> int:
    from eukhe.records.fs import Bounded, EditAnswer  # noqa: PLC0415  (lazy: CLI start-up time)

    if args.json:
        emit_json(answer.to_json())
    elif isinstance(answer, Bounded):
        print_window(answer.output.text, answer.output.notice)
    elif isinstance(answer, EditAnswer):
        for change in answer.changes:
            arrow = f" -> {change.destination}" if change.destination else ""
            emit_text(f"{change.action}: {change.path}{arrow}\n")
    else:
        verb = "created" if answer.created else "replaced"
        emit_text(f"{verb} {answer.absolute} ({answer.bytes_written} bytes)\n")
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    payload = {"session": args.session, "path": _here(args.path), "offset": args.offset, "limit": args.limit}
    from eukhe.records.fs import ReadAnswer  # noqa: PLC0415  (lazy: CLI start-up time)

    return _show(args, call(args, "fs.read", payload, answer=ReadAnswer))


def cmd_write(args: argparse.Namespace) -> int:
    payload = {"session": args.session, "path": _here(args.path), "content": _text_from(args, "content")}
    from eukhe.records.fs import WriteAnswer  # noqa: PLC0415  (lazy: CLI start-up time)

    return _show(args, call(args, "fs.write", payload, answer=WriteAnswer))


def cmd_edit(args: argparse.Namespace) -> int:
    from eukhe.records.fs import EditAnswer  # noqa: PLC0415  (lazy: CLI start-up time)

    payload = {"session": args.session, "patch": _text_from(args, "patch")}
    return _show(args, call(args, "fs.edit", payload, answer=EditAnswer))


def cmd_grep(args: argparse.Namespace) -> int:
    payload = {"session": args.session, "pattern": args.pattern, "path": _here(args.path), "glob": args.glob}
    from eukhe.records.fs import GrepAnswer  # noqa: PLC0415  (lazy: CLI start-up time)

    return _show(args, call(args, "fs.grep", payload, answer=GrepAnswer))


def cmd_glob(args: argparse.Namespace) -> int:
    payload = {"session": args.session, "pattern": args.pattern, "path": _here(args.path)}
    from eukhe.records.fs import GlobAnswer  # noqa: PLC0415  (lazy: CLI start-up time)

    return _show(args, call(args, "fs.glob", payload, answer=GlobAnswer))


def register(subparsers: Any) -> None:
    """Add `eukhe fs ...` to the parser."""
    fs = subparsers.add_parser("fs", help="the file tools on a session's working directory")
    commands = fs.add_subparsers(dest="fs_command", required=True, parser_class=type(fs))
    read = commands.add_parser("read", help="a text file's lines, bounded")
    read.add_argument("path")
    read.add_argument("--offset", type=positive_int, help="the first line (1-based)")
    read.add_argument("--limit", type=positive_int, help="how many lines")
    read.set_defaults(handler=cmd_read)
    write = commands.add_parser("write", help="create or replace a file (--content TEXT, a FILE, or - for stdin)")
    write.add_argument("path")
    write.add_argument("source", nargs="?", metavar="FILE", help="a file holding the content, or - for stdin")
    write.add_argument("--content", help="the content")
    write.set_defaults(handler=cmd_write)
    edit = commands.add_parser("edit", help="apply one multi-file patch (a FILE, or - for stdin); docs/fs.md")
    edit.add_argument("source", nargs="?", metavar="PATCH", help="a file holding the patch, or - for stdin")
    edit.set_defaults(handler=cmd_edit, content=None)
    grep = commands.add_parser("grep", help="lines matching a regex, bounded")
    grep.add_argument("pattern")
    grep.add_argument("path", nargs="?", default=".")
    grep.add_argument("--glob", help="only files matching this glob")
    grep.set_defaults(handler=cmd_grep)
    glob = commands.add_parser("glob", help="files matching a glob (** crosses directories), bounded")
    glob.add_argument("pattern")
    glob.add_argument("path", nargs="?", default=".")
    glob.set_defaults(handler=cmd_glob)
    for parser in (read, write, edit, grep, glob):
        parser.add_argument("--session", required=True, help="the session id")
        add_daemon_options(parser)
