"""Where sessions live on disk and how their directories are made ("Local access" 3; S1 store).

`<sessions root>/<id>/main.jsonl` is the journal; `<sessions root>/<id>/artifacts/` holds BoundedOutput artifacts.
Every directory is made 0700 and every file 0600 at creation (modes given to mkdir/open); each open also sets 0700
on its session dir, for one an older eukhe made with the umask. A fork is written in a private staging dir under
the root and renamed into place, so a half-written copy never has a session's name.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

from eukhe import paths
from eukhe.core.fsmode import PRIVATE_DIR_MODE
from eukhe.errors import EukheError, UsageError
from eukhe.private_fs import create_private_file, make_private_dirs
from eukhe.session.journal import Record, encode_commit

JOURNAL_NAME = "main.jsonl"
ARTIFACTS_NAME = "artifacts"
STAGING_PREFIX = ".staging-"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class UnknownSessionError(EukheError):
    """No session with this id under the sessions root."""

    code = "unknown_session"

    def __init__(self, session_id: str, root: Path) -> None:
        super().__init__(f"no session {session_id!r} under {root}")
        self.session_id = session_id
        self.root = root


class SessionExistsError(EukheError):
    """A create named an id that is already a session."""

    code = "session_exists"

    def __init__(self, session_id: str, root: Path) -> None:
        super().__init__(f"session {session_id!r} already exists under {root}")
        self.session_id = session_id
        self.root = root


class SessionOpenError(EukheError):
    """A session dir could not be made private at open (chmod 0700 failed), so the open fails."""

    code = "session_open_failed"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot open session dir {path}: {reason}")
        self.path = path
        self.reason = reason


def new_session_id() -> str:
    """A fresh session id: 12 random hex digits."""
    return secrets.token_hex(6)


def check_session_id(session_id: str) -> str:
    """A session id is a plain file name (letters, digits, `_.-`, not starting with a dot)."""
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id):
        raise UsageError(f"bad session id: {session_id!r}")
    return session_id


def resolve_root(root: Path | None) -> Path:
    """The sessions root (made 0700 with any missing parents)."""
    return make_private_dirs(Path(root) if root is not None else paths.sessions_root())


def create_session_dir(root: Path, session_id: str) -> Path:
    """Make `<root>/<id>` (0700) and its artifacts dir; SessionExistsError if it is there already."""
    directory = root / check_session_id(session_id)
    try:
        os.mkdir(directory, PRIVATE_DIR_MODE)
    except FileExistsError:
        raise SessionExistsError(session_id, root) from None
    os.mkdir(directory / ARTIFACTS_NAME, PRIVATE_DIR_MODE)
    return directory


def open_session_dir(root: Path, session_id: str) -> Path:
    """The dir of an existing session, set to 0700 (an older eukhe may have made it with the umask)."""
    directory = root / check_session_id(session_id)
    if not (directory / JOURNAL_NAME).is_file():
        raise UnknownSessionError(session_id, root)
    try:
        os.chmod(directory, PRIVATE_DIR_MODE)
    except OSError as error:
        raise SessionOpenError(directory, error.strerror or str(error)) from error
    make_private_dirs(directory / ARTIFACTS_NAME)
    return directory


def write_staged_session(root: Path, session_id: str, commits: Sequence[Sequence[Record]]) -> Path:
    """Write a new session's journal in a private staging dir (0700, file 0600), then rename it into place."""
    check_session_id(session_id)
    staging = root / f"{STAGING_PREFIX}{secrets.token_hex(6)}"
    os.mkdir(staging, PRIVATE_DIR_MODE)
    try:
        os.mkdir(staging / ARTIFACTS_NAME, PRIVATE_DIR_MODE)
        fd = create_private_file(staging / JOURNAL_NAME)
        try:
            data = b"".join(encode_commit(seq, records) for seq, records in enumerate(commits, start=1))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        target = root / session_id
        if target.exists():
            raise SessionExistsError(session_id, root)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
