"""Maintainers' generators for derived files (docs/architecture.svg, the tool sections of docs/mcp.md).

Each is a `python -m tools.NAME` command that rewrites its file, or with `--check` says whether it is out of date;
a unit test runs the check, so a derived file never drifts from its source.
"""
