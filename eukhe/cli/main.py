"""Entry point of the `eukhe` command: builds the parser from the command modules and translates errors once."""

from __future__ import annotations

import sys

from eukhe.cli.common import ArgumentParser, report_error
from eukhe.errors import EukheError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

COMMANDS: dict[str, str] = {
    "run": "eukhe.cli.run",
    "kernel": "eukhe.cli.kernel",
    "daemon": "eukhe.cli.daemon",
    "session": "eukhe.cli.session",
    "bash": "eukhe.cli.bash",
    "ipython": "eukhe.cli.ipython",
    "jobs": "eukhe.cli.jobs",
    "watch": "eukhe.cli.watch",
    "tree": "eukhe.cli.tree",
    "fs": "eukhe.cli.fs",
    "spawn": "eukhe.cli.children",
    "children": "eukhe.cli.children",
    "remote": "eukhe.cli.remote",
    "gc": "eukhe.cli.gc",
    "schema": "eukhe.cli.schema",
    "mcp": "eukhe.cli.mcp",
    "skills": "eukhe.cli.skills",
}
"""Each command's module has `register(subparsers)`, which adds the command and sets `handler` on it."""


def build_parser(command: str | None = None) -> ArgumentParser:
    """The `eukhe` parser: only the named command's module is imported (start-up stays quick), or every module
    when no known command is named (help and usage errors list them all)."""
    parser = ArgumentParser(prog="eukhe", description="The execution layer of a coding agent.")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    # One module may hold several commands (children: spawn and children): each module registers once.
    names = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in names:
        # __import__ rather than importlib.import_module: importing importlib (and warnings) costs start-up time.
        __import__(name, fromlist=["register"]).register(subparsers)
    return parser


def chosen_command(args: Sequence[str]) -> str | None:
    """The command word of an argument list (its first argument that is not an option), if any."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `eukhe` command; returns its exit code (also used as the process exit code)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    own_args = args_list[: args_list.index("--")] if "--" in args_list else args_list
    as_json = "--json" in own_args
    try:
        args = build_parser(chosen_command(own_args)).parse_args(args_list)
        handler: Callable[..., int] = args.handler
        return handler(args)
    except EukheError as error:
        return report_error(error, as_json)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
