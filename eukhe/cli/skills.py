"""`eukhe skills list [--cwd DIR] [--json]` and `eukhe skills show NAME [--cwd DIR] [--json]`: the Agent Skills
found for a working directory (docs/skills.md). Both read the disk in this process: no daemon is needed.
"""

from __future__ import annotations

import argparse

from eukhe.cli.common import emit_json, emit_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up time); mypy knows the name
if TYPE_CHECKING:
    from typing import Any

    from eukhe.records.skills import SkillRow


def _mark(row: SkillRow) -> str:
    if row.status == "shadowed":
        return f"shadowed by {row.shadowed_by}"
    return row.status


def cmd_list(args: argparse.Namespace) -> int:
    """Print every skill found: offered, shadowed (the winner named) and invalid (with its diagnostics)."""
    from eukhe.skills import list_skills  # noqa: PLC0415  (lazy: CLI start-up time)

    listing = list_skills(args.cwd)
    if args.json:
        emit_json(listing.to_json())
        return 0
    if not listing.skills:
        searched = ", ".join(root.path for root in listing.roots)
        emit_text(f"no skills found (searched {searched})\n")
        return 0
    for row in listing.skills:
        python = ", python" if row.python else ""
        emit_text(f"{row.name}  [{row.scope}{python}; {_mark(row)}]  {row.path}\n")
        if row.description:
            emit_text(f"    {' '.join(row.description.split())}\n")
        for diagnostic in row.diagnostics:
            field = f" `{diagnostic.field}`" if diagnostic.field else ""
            emit_text(f"    {diagnostic.severity}: {diagnostic.file}{field}: {diagnostic.message}\n")
    offered = sum(row.offered for row in listing.skills)
    emit_text(f"{offered} offered of {len(listing.skills)} found\n")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print the offered skill's SKILL.md body (after its frontmatter)."""
    from eukhe.skills import show_skill  # noqa: PLC0415  (lazy: CLI start-up time)

    shown = show_skill(args.name, args.cwd)
    if args.json:
        emit_json(shown.to_json())
    else:
        emit_text(shown.body if shown.body.endswith("\n") or not shown.body else shown.body + "\n")
    return 0


def register(subparsers: Any) -> None:
    """Add `eukhe skills list|show` to the parser."""
    skills = subparsers.add_parser("skills", help="the Agent Skills found for a working directory")
    commands = skills.add_subparsers(dest="skills_command", required=True, parser_class=type(skills))
    listing = commands.add_parser("list", help="every skill found: offered, shadowed and invalid ones")
    show = commands.add_parser("show", help="print an offered skill's SKILL.md body")
    show.add_argument("name", metavar="NAME", help="the skill's name")
    for parser, handler in ((listing, cmd_list), (show, cmd_show)):
        parser.add_argument("--cwd", metavar="DIR", help="the working directory (default: here)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.set_defaults(handler=handler)
