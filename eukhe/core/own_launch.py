"""What uv put in eukhe's environment to run eukhe itself, which the agent's jobs and kernel do not get.

`uv run eukhe mcp` (the README's way, and a common MCP client's config) starts eukhe with `VIRTUAL_ENV` naming
eukhe's own environment, and `python3 -m uv` adds `UV_INTERNAL__PARENT_INTERPRETER`, naming the Python that ran it,
for the uv it starts. A job that inherited them would have every `uv pip install` it runs take them over the
project's `.venv`: it would install into eukhe's environment or that Python's, which the sandbox refuses (outside the
writable roots) and which, with the sandbox off, it would change. A `VIRTUAL_ENV` that names another environment is
the user's own, and stays.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from eukhe.core.pathmap import normalize

PARENT_INTERPRETER = "UV_INTERNAL__PARENT_INTERPRETER"
"""uv's own variable: the Python that ran `python -m uv`, meant for the uv that starts (its `uv pip` installs there)."""
VIRTUAL_ENV = "VIRTUAL_ENV"
"""The active virtual environment, which `uv pip` and `pip` install into before any `.venv` they would find."""


def without_own_launch(environment: Mapping[str, str], own_prefixes: Collection[str]) -> dict[str, str]:
    """The environment without what uv set to run eukhe: its parent interpreter, and `VIRTUAL_ENV` when it names one
    of `own_prefixes` (the environment eukhe runs in, as `sys.prefix` and its real path give it)."""
    own = {normalize(prefix) for prefix in own_prefixes if prefix.startswith("/")}

    def launchers(name: str, value: str) -> bool:
        if name == PARENT_INTERPRETER:
            return True
        return name == VIRTUAL_ENV and value.startswith("/") and normalize(value) in own

    return {name: value for name, value in environment.items() if not launchers(name, value)}
