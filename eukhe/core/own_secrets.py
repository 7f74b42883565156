"""eukhe's own secrets in an environment: the variables that hold them, and an environment without them.

The MCP server's bearer token (`EUKHE_MCP_TOKEN`) lets whoever holds it drive every session over the loopback. The
user gives it to `eukhe mcp --http`; it must not reach the daemon that server starts, nor any job or kernel: a
confined job that read it could call the server and run commands outside its sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping

MCP_TOKEN = "EUKHE_MCP_TOKEN"
"""The MCP server's bearer token, when the user sets it."""
OWN_SECRETS = frozenset({MCP_TOKEN})
"""The variables that hold eukhe's own secrets."""


def without_own_secrets(environment: Mapping[str, str]) -> dict[str, str]:
    """The environment with eukhe's own secrets left out."""
    return {name: value for name, value in environment.items() if name not in OWN_SECRETS}
