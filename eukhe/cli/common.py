"""What every CLI command shares: argument errors that exit 2, JSON output, and typed errors at one boundary."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from eukhe.errors import EukheError, UsageError

EXIT_USAGE = 2
EXIT_ERROR = 1


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def emit_json(payload: Any) -> None:
    """Print one JSON value on stdout, on one line."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def error_code(error: BaseException) -> str:
    """A stable code for an error: the `code` attribute if it has one, else its class name in snake case."""
    code = getattr(error, "code", None)
    if isinstance(code, str):
        return code
    name = type(error).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def report_error(error: EukheError, as_json: bool) -> int:
    """Print an error once (a JSON object under --json, else one line on stderr); return the exit code."""
    exit_code = getattr(error, "exit_code", EXIT_USAGE if isinstance(error, UsageError) else EXIT_ERROR)
    if as_json:
        emit_json({"error": error_code(error), "message": str(error)})
    else:
        message = str(error)
        sys.stderr.write(message + "\n" if message.startswith("eukhe") else f"eukhe: {message}\n")
    return int(exit_code)


def positive_int(text: str) -> int:
    """argparse type: a non-negative integer."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value
