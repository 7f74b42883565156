"""Where a child's workspace lives on disk (spec S3 "A subagent's workspace" 6, 7).

    <root>/<parent session>/<child>/       0700; <root> is <agent dir>/workspaces/ in the daemon
        base/          the workspace as the child found it (removed after the hand-back)
        copy/          the child's working directory; after the hand-back, a symlink to the parent's directory
        copy.msgpack   the spawn's record: the parent's dir, the copy's stat data, when the copy began (removed after)
        handback.json  the hand-back's record and report: it ends the hand-back (kept)
        conflicts/     the child's versions of the conflicting paths, each under its own path (kept)
        .base.eukhe-retired/, .copy.eukhe-retired/   base and copy set aside after the record, until removed

The stored working directory of a child is `copy`, so a child woken after its hand-back starts in the parent's
directory through the symlink.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from eukhe.workspace.errors import WorkspaceNameError

HANDBACK_SUFFIX = ".eukhe-handback"
"""The suffix of the fixed-name copy that sits beside a path while it is replaced (`.<name>.eukhe-handback`)."""
RETIRED_BASE = ".base.eukhe-retired"
"""Where the base goes, in one rename, once the hand-back has its record (then it is removed)."""
RETIRED_COPY = ".copy.eukhe-retired"
"""Where the child's copy goes, in one rename, before the symlink takes its place (then it is removed)."""
NAME_MAX = 255


def check_name(name: str) -> str:
    """A session or child name must be one plain path component."""
    if not name or name in (".", "..") or "/" in name or "\0" in name or len(name.encode()) > NAME_MAX:
        raise WorkspaceNameError(name)
    return name


def temp_name(name: str) -> str:
    """The fixed name of the copy beside `name`: the same in every run, so a rerun finds what a crash left."""
    candidate = f".{name}{HANDBACK_SUFFIX}"
    if len(candidate.encode(errors="surrogateescape")) <= NAME_MAX:
        return candidate
    # A name too long to carry the prefix and suffix: its digest instead (still fixed for every run).
    return f".{hashlib.sha256(name.encode(errors='surrogateescape')).hexdigest()}{HANDBACK_SUFFIX}"


def temp_beside(path: Path) -> Path:
    """The fixed-name copy beside `path`."""
    return path.with_name(temp_name(path.name))


@dataclass(frozen=True, slots=True)
class WorkspaceLayout:
    """The paths of one child's workspace."""

    root: Path
    parent_session: str
    child: str

    @classmethod
    def at(cls, root: Path, parent_session: str, child: str) -> WorkspaceLayout:
        """The layout under `root` for a parent session's child (names checked)."""
        return cls(Path(root), check_name(parent_session), check_name(child))

    @property
    def dir(self) -> Path:
        return self.root / self.parent_session / self.child

    @property
    def base(self) -> Path:
        return self.dir / "base"

    @property
    def copy(self) -> Path:
        """The child's working directory."""
        return self.dir / "copy"

    @property
    def copy_record(self) -> Path:
        return self.dir / "copy.msgpack"

    @property
    def record(self) -> Path:
        return self.dir / "handback.json"

    @property
    def conflicts(self) -> Path:
        return self.dir / "conflicts"

    @property
    def retired_base(self) -> Path:
        return self.dir / RETIRED_BASE

    @property
    def retired_copy(self) -> Path:
        return self.dir / RETIRED_COPY
