"""Skill folders for tests: a SKILL.md with the frontmatter given, and the files beside it."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_skill(
    root: Path,
    name: str,
    front: dict[str, object] | str | None = None,
    body: str = "# Use it\nDo the thing.\n",
    files: dict[str, str | bytes] | None = None,
) -> Path:
    """`root/<name>/SKILL.md` (frontmatter: the mapping as YAML, a raw text, or by default a valid one), and the
    files given (relative path: text or bytes); the skill's directory."""
    skill = root / name
    skill.mkdir(parents=True, exist_ok=True)
    if front is None:
        front = {"name": name, "description": f"The {name} skill."}
    text = front if isinstance(front, str) else yaml.safe_dump(front, sort_keys=False)
    (skill / "SKILL.md").write_text(f"---\n{text}---\n{body}")
    for relative, content in (files or {}).items():
        path = skill / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return skill
