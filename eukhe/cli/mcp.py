"""`eukhe mcp [--cwd DIR | --session ID] [--http ADDRESS [--allow-remote]] [--structured]`: serve MCP (docs/mcp.md).

Over stdio by default: creates a session in --cwd (default: the current directory) through the per-user daemon,
started on first use, or attaches to an existing one with --session. stdout is the MCP channel; stderr carries
diagnostics only. The session outlives the server: `eukhe session list` shows it, and its jobs go on after the
client disconnects.

With --http, over MCP's streamable HTTP at ADDRESS (`127.0.0.1:PORT`, `[::1]:PORT` or `unix:PATH`): each client
connection gets a session of its own in --cwd, or they all attach to --session. Every request needs the bearer
token (EUKHE_MCP_TOKEN, else the token file the server names at start); a host that is not loopback needs
--allow-remote.
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
    """Serve until the client closes stdin (stdio), or until SIGINT or SIGTERM (--http)."""
    if args.session is not None and (args.sandbox is not None or args.network is not None or args.allow_domain):
        raise UsageError("--sandbox, --network and --allow-domain set the policy of a new session: not with --session")
    if args.allow_remote and args.http is None:
        raise UsageError("--allow-remote goes with --http: stdio is local")
    if args.http is not None:
        from eukhe.mcp.http import run_http  # noqa: PLC0415  (lazy: the SDK, uvicorn and asyncio only for this)

        return run_http(
            socket_path(args.daemon_socket),
            args.http,
            allow_remote=args.allow_remote,
            cwd=args.cwd,
            session=args.session,
            sandbox=sandbox_args(args),
            structured=args.structured,
        )
    from eukhe.mcp.server import run  # noqa: PLC0415  (lazy: the SDK and asyncio only for this command)

    return run(
        socket_path(args.daemon_socket),
        cwd=args.cwd,
        session=args.session,
        sandbox=sandbox_args(args),
        structured=args.structured,
    )


def register(subparsers: Any) -> None:
    """Add `eukhe mcp` to the parser."""
    parser = subparsers.add_parser(
        "mcp", help="serve MCP over stdio or HTTP (bash, ipython, jobs) for one session, for any agent"
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--cwd", metavar="DIR", help="create the session in DIR (default: the current directory)")
    target.add_argument("--session", metavar="ID", help="attach to an existing session instead")
    parser.add_argument("--daemon-socket", metavar="PATH", help="the daemon's socket (default $TMPDIR/eukhe-UID/...)")
    add_sandbox_options(parser)
    parser.add_argument(
        "--http",
        metavar="ADDRESS",
        help="serve MCP's streamable HTTP at ADDRESS (127.0.0.1:PORT, [::1]:PORT, unix:PATH; port 0: any free one), "
        "each connection its own session (or --session's), every request with the bearer token",
    )
    parser.add_argument(
        "--allow-remote", action="store_true", help="with --http: allow a host that is not loopback (0.0.0.0, ...)"
    )
    parser.add_argument(
        "--structured",
        action="store_true",
        help="also send each answer's record as structuredContent, with each tool's outputSchema (for programs; "
        "models read the text: clients that get both show the record instead)",
    )
    parser.set_defaults(handler=cmd_mcp)
