"""`eukhe kernel install [--python PATH] [--check] [--json]` (spec "The kernel environment": install once).

`install` is the only command that downloads for the kernel; `--check` reports the state from local files only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from eukhe.cli.common import emit_json, emit_text
from eukhe.kernel.bootstrap import check_state, install_kernel_python
from eukhe.records.kernel_env import KernelInstalled, KernelState


def register(subparsers: Any) -> None:
    """Add `eukhe kernel install` to the parser."""
    kernel: argparse.ArgumentParser = subparsers.add_parser("kernel", help="the Python kernel's environment")
    actions = kernel.add_subparsers(dest="kernel_command", required=True, parser_class=type(kernel))
    install: argparse.ArgumentParser = actions.add_parser(
        "install", help="install the kernel venv (the only command that downloads for the kernel)"
    )
    install.add_argument(
        "--python",
        metavar="PATH",
        help="build the venv on this existing interpreter instead of a Python downloaded by uv",
    )
    install.add_argument("--check", action="store_true", help="show the state; no network request, no change")
    install.add_argument("--json", action="store_true", help="print one JSON object")
    install.set_defaults(handler=run_install)


def _print_state(state: KernelState) -> None:
    lines = [f"kernel environment: {state.state}"]
    if state.user_python:
        lines.append(f"  EUKHE_KERNEL_PYTHON: {state.user_python} (eukhe installs nothing)")
    lines.append(f"  venv: {state.venv}")
    if state.python:
        lines.append(f"  python: {state.python}")
    if not state.ready:
        lines.append("  run `eukhe kernel install` once (add --python PATH to use an existing interpreter)")
    emit_text("\n".join(lines) + "\n")


def run_install(args: argparse.Namespace) -> int:
    """Install (or keep) the kernel venv, or with --check report its state."""
    if args.check:
        state = check_state()
        if args.json:
            emit_json(state.to_json())
        else:
            _print_state(state)
        return 0
    result = asyncio.run(install_kernel_python(args.python))
    answer = KernelInstalled(
        python=str(result.python),
        built=result.built,
        user_python=result.user_python,
        commands=[list(command.argv) for command in result.commands],
    )
    for failure in result.skill_failures:
        emit_text(f"eukhe: {failure}\n", sys.stderr)
    if args.json:
        emit_json(answer.to_json())
    elif result.user_python:
        emit_text(f"EUKHE_KERNEL_PYTHON is set: the kernel runs on {result.python}; nothing installed\n")
    elif result.built:
        emit_text(f"kernel venv installed and checked: {result.python}\n")
    else:
        emit_text(f"kernel venv already installed for this build: {result.python} (nothing downloaded)\n")
    return 0
