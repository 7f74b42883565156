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


BACKEND = '''\
"""A stdlib-only PEP 517 backend: packs the package beside it into a py3-none-any wheel (no index needed)."""
import base64, hashlib, os, zipfile
ROOT = os.path.dirname(os.path.abspath(__file__))
NAME, PACKAGE, VERSION = {name!r}, {package!r}, "0.1.0"
DIST = NAME.replace("-", "_")
def _files():
    base = os.path.join(ROOT, PACKAGE)
    for top, _, names in sorted(os.walk(base)):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(top, name)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), open(path, "rb").read()
def _meta():
    return f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: {{VERSION}}\\n".encode()
def get_requires_for_build_wheel(config_settings=None):
    return []
def prepare_metadata_for_build_wheel(directory, config_settings=None):
    info = os.path.join(directory, f"{{DIST}}-{{VERSION}}.dist-info")
    os.makedirs(info, exist_ok=True)
    open(os.path.join(info, "METADATA"), "wb").write(_meta())
    return os.path.basename(info)
def build_wheel(directory, config_settings=None, metadata_directory=None):
    name = f"{{DIST}}-{{VERSION}}-py3-none-any.whl"
    info = f"{{DIST}}-{{VERSION}}.dist-info"
    entries = list(_files()) + [
        (f"{{info}}/METADATA", _meta()),
        (f"{{info}}/WHEEL", b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"),
    ]
    record = []
    with zipfile.ZipFile(os.path.join(directory, name), "w") as wheel:
        for path, data in entries:
            wheel.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{{path}},sha256={{digest}},{{len(data)}}")
        record.append(f"{{info}}/RECORD,,")
        wheel.writestr(f"{{info}}/RECORD", "\\n".join(record) + "\\n")
    return name
'''


def write_python_skill(root: Path, name: str, package: str, source: str) -> Path:
    """A Python skill: `root/<name>/` with a SKILL.md, a pyproject.toml whose in-tree backend needs no index, and
    `<package>/__init__.py` holding `source`; its directory."""
    return write_skill(
        root,
        name,
        files={
            "pyproject.toml": (
                f'[project]\nname = "{name}"\nversion = "0.1.0"\n\n[build-system]\nrequires = []\n'
                'build-backend = "skill_backend"\nbackend-path = ["."]\n'
            ),
            "skill_backend.py": BACKEND.format(name=name, package=package),
            f"{package}/__init__.py": source,
        },
    )
