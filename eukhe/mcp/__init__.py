"""`eukhe mcp`: eukhe as an MCP server over stdio, so that any agent can use it with its guarantees.

- `server`: the SDK server, one session per server, the handlers, cancellation (docs/mcp.md).
- `tools`: the table of tools, one row per daemon op a model may call; schemas generated from the records.
- `results`: what a model reads of each answer (rendered by `eukhe.core.render`).
- `progress`: MCP progress notifications from the session's watch stream.
- `link`: asyncio connections to the daemon, one per call, with the connection-level `cancel`.

Layering: above the daemon client, below the CLI (tests/laws/test_import_layers.py); only `eukhe.cli.mcp` imports it.
"""
