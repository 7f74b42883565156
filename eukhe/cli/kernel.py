"""`eukhe kernel install [--python PATH] [--with PACKAGE...] [--without NAME...] [--check] [--json]` (spec "The
kernel environment": install once).

`install` is the only command that downloads for the kernel; `--check` reports the state from local files only.
`--with` adds packages to the kernel venv, hash-locked and kept by every rebuild; `--without` takes them out.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from eukhe.cli.common import emit_json, emit_text
from eukhe.core.kernel_added import RequirementError
from eukhe.errors import UsageError
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
    install.add_argument(
        "--with",
        dest="add",
        metavar="PACKAGE",
        nargs="+",
        action="extend",
        default=[],
        help="add packages to the kernel venv (pandas, 'numpy>=2'): locked with their hashes, kept by every rebuild",
    )
    install.add_argument(
        "--without",
        dest="remove",
        metavar="NAME",
        nargs="+",
        action="extend",
        default=[],
        help="take packages added with --with out of the kernel venv",
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
    if state.added_packages:
        lines.append(f"  added with --with: {' '.join(state.added_packages)}")
    if not state.ready:
        lines.append("  run `eukhe kernel install` once (add --python PATH to use an existing interpreter)")
    emit_text("\n".join(lines) + "\n")


def run_install(args: argparse.Namespace) -> int:
    """Install (or keep) the kernel venv, or with --check report its state."""
    if args.check and (args.add or args.remove):
        raise UsageError("eukhe kernel install: --check changes nothing; leave out --with and --without")
    if args.check:
        state = check_state()
        if args.json:
            emit_json(state.to_json())
        else:
            _print_state(state)
        return 0
    try:
        result = asyncio.run(install_kernel_python(args.python, add=args.add, remove=args.remove))
    except RequirementError as error:
        raise UsageError(f"eukhe kernel install: {error}") from None
    answer = KernelInstalled(
        python=str(result.python),
        built=result.built,
        user_python=result.user_python,
        commands=[list(command.argv) for command in result.commands],
        added_packages=result.added_packages,
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
    if result.added_packages and not args.json:
        emit_text(f"added with --with: {' '.join(result.added_packages)}\n")
    return 0
