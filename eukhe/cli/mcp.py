"""`eukhe mcp [--cwd DIR | --session ID]`: serve MCP over stdio for one session (docs/mcp.md).

Creates a session in --cwd (default: the current directory) through the per-user daemon, started on first use, or
attaches to an existing one with --session. stdout is the MCP channel; stderr carries diagnostics only. The session
outlives the server: `eukhe session list` shows it, and its jobs go on after the client disconnects.
"""

from __future__ import annotations

import argparse

from eukhe.cli.common import add_sandbox_options, sandbox_args
from eukhe.daemon.client import socket_path
from eukhe.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin."""
    from eukhe.mcp.server import run  # noqa: PLC0415  (lazy: the SDK and asyncio only for this command)

    if args.session is not None and (args.sandbox is not None or args.network is not None):
        raise UsageError("--sandbox and --network set the policy of a new session: not with --session")
    return run(socket_path(args.daemon_socket), cwd=args.cwd, session=args.session, sandbox=sandbox_args(args))


def register(subparsers: Any) -> None:
    """Add `eukhe mcp` to the parser."""
    parser = subparsers.add_parser(
        "mcp", help="serve MCP over stdio (bash, ipython, jobs) for one session, for any agent"
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--cwd", metavar="DIR", help="create the session in DIR (default: the current directory)")
    target.add_argument("--session", metavar="ID", help="attach to an existing session instead")
    parser.add_argument("--daemon-socket", metavar="PATH", help="the daemon's socket (default $TMPDIR/eukhe-UID/...)")
    add_sandbox_options(parser)
    parser.set_defaults(handler=cmd_mcp)
