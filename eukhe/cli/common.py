"""What every CLI command shares: argument errors that exit 2, JSON output, typed errors at one boundary, and the one
way text an agent may control reaches a stream (`emit_text`: made safe on a terminal, as it is elsewhere).

The client path (`eukhe bash`, `eukhe session ...`) imports this on every call, so it imports nothing beyond
argparse, json, os and sys at run time (tests/unit/test_cli_imports.py guards the client path's imports).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from eukhe.errors import EukheError, UsageError, error_code, error_details, error_field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any, NoReturn, TextIO

    from eukhe.records.sandbox import SandboxPolicy

EXIT_USAGE = 2
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130
"""Ctrl-C: the shell's code for a command ended by SIGINT (also when it cancelled its job first)."""
EXIT_BY_CODE = {"cancelled": EXIT_INTERRUPTED}


def terminal_columns(fallback: int = 80) -> int:
    """The terminal width as `shutil.get_terminal_size` finds it ($COLUMNS, then stdout's terminal, then 80),
    without importing shutil (and its bz2, lzma and zlib): argparse makes a help formatter per argument."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = fallback
    return columns or fallback


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, with the width found by `terminal_columns` (the same width, a cheaper import)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit code 2 (and whose help formatter does not
    import shutil)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal (a person reads it), the one test of where text is made safe to show."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # a closed or replaced stream is no terminal
        return False


def emit_text(text: str, stream: TextIO | None = None) -> None:
    """Write text an agent may control (output, commands, paths, messages) to stdout, or `stream`: on a terminal made
    safe to show (eukhe.core.terminal: escape sequences but colours and controls but newline and tab are shown,
    never obeyed); to a pipe or a file as it is, since there it is data a program reads."""
    out = sys.stdout if stream is None else stream
    if is_terminal(out):
        from eukhe.core.terminal import terminal_safe  # noqa: PLC0415  (lazy: CLI start-up time off a terminal)

        text = terminal_safe(text)
    out.write(text)


def emit_json(payload: Any) -> None:
    """Print one JSON value on stdout, on one line (on a terminal, still JSON of the same value: `emit_text`)."""
    emit_text(json.dumps(payload, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def report_error(error: EukheError, as_json: bool) -> int:
    """Print an error once (a JSON object under --json, else one line on stderr); return the exit code."""
    code = error_code(error)
    exit_code = getattr(error, "exit_code", EXIT_USAGE if isinstance(error, UsageError) else EXIT_ERROR)
    exit_code = EXIT_BY_CODE.get(code, exit_code)
    if as_json:
        emit_json({"error": code, "message": str(error), "field": error_field(error), "details": error_details(error)})
    else:
        message = str(error)
        emit_text(message + "\n" if message.startswith("eukhe") else f"eukhe: {message}\n", sys.stderr)
    return int(exit_code)


def non_negative_int(text: str) -> int:
    """argparse type: an integer, 0 or more (a budget of 0 answers at once)."""
    value = _decimal(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer, 1 or more (a line number, a count)."""
    value = _decimal(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {value}")
    return value


def _decimal(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


SANDBOX_MODES = ("workspace_write", "read_only", "off")


def add_sandbox_options(parser: argparse.ArgumentParser) -> None:
    """`--sandbox MODE --network on|off`: the new session's policy over the settings files' (docs/sandbox.md)."""
    parser.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        help="confine what the agent runs: workspace_write (the default), read_only, or off (your full rights)",
    )
    parser.add_argument(
        "--network",
        choices=("on", "allowlist", "off"),
        help="whether confined commands reach the network: on, off, or allowlist (only the allowed domains, "
        "through eukhe's proxy)",
    )
    parser.add_argument(
        "--allow-domain",
        action="append",
        metavar="NAME",
        help="with --network allowlist, one more allowed domain (NAME, *.NAME for the names below it, or an IP "
        "address); repeatable",
    )


def sandbox_args(args: argparse.Namespace) -> dict[str, Any]:
    """The `sandbox` a session.create asks for, from `--sandbox` and `--network` (nothing when neither is given)."""
    given = (("mode", args.sandbox), ("network", args.network), ("allow_domains", args.allow_domain))
    choice = {key: value for key, value in given if value is not None}
    return {"sandbox": choice} if choice else {}


def sandbox_line(policy: SandboxPolicy) -> str:
    """How `session show` says the policy in force."""
    if policy.mode == "off":
        return "sandbox: off (commands run with your full rights)"
    roots = ", ".join(policy.writable_roots) or "none"
    allowed = ""
    if policy.network == "allowlist":
        allowed = f" (allow_domains: {', '.join(policy.allow_domains) or 'none'}; deny_domains: "
        allowed += f"{', '.join(policy.deny_domains) or 'none'}; ports: {', '.join(map(str, policy.allow_ports))})"
    passthrough = ", ".join(policy.env_passthrough) or "none"
    return (
        f"sandbox: {policy.mode}, network {policy.network}{allowed}, extra writable roots: {roots}, "
        f"deny_read: {', '.join(policy.deny_read)}, env_passthrough: {passthrough}"
    )
