"""Entry point of the `eukhe` command: builds the parser from the command modules and translates errors once."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from eukhe.cli.common import ArgumentParser, report_error
from eukhe.errors import EukheError

COMMAND_MODULES: tuple[str, ...] = (
    "eukhe.cli.run",
    "eukhe.cli.kernel",
    "eukhe.cli.daemon",
    "eukhe.cli.session",
    "eukhe.cli.bash",
    "eukhe.cli.jobs",
    "eukhe.cli.watch",
    "eukhe.cli.tree",
)
"""Each module has `register(subparsers)`, which adds its commands and sets `handler` on them."""


def build_parser() -> ArgumentParser:
    """The whole `eukhe` parser."""
    parser = ArgumentParser(prog="eukhe", description="The execution layer of a coding agent.")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `eukhe` command; returns its exit code (also used as the process exit code)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    own_args = args_list[: args_list.index("--")] if "--" in args_list else args_list
    as_json = "--json" in own_args
    try:
        args = build_parser().parse_args(args_list)
        handler: Callable[..., int] = args.handler
        return handler(args)
    except EukheError as error:
        return report_error(error, as_json)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
