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

from eukhe import mounts, paths
from eukhe.core.fsmode import PRIVATE_DIR_MODE
from eukhe.errors import EukheError, InputError, resource_shortage
from eukhe.fsio import fsync_dir, write_all
from eukhe.private_fs import create_private_file, make_private_dirs
from eukhe.records.journal import JournalRecord, SessionHeader
from eukhe.store.journal import encode_commit, read_header

JOURNAL_NAME = "main.jsonl"
ARTIFACTS_NAME = "artifacts"
WORKER_LOCK_NAME = "worker.lock"
"""A file in the session dir that the daemon worker hosting the session holds (flock) while the session is open."""
STAGING_PREFIX = ".staging-"
DELETING_PREFIX = ".deleting-"
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


def check_session_id(session_id: str, root: Path | None = None) -> str:
    """A session id is a plain file name (letters, digits, `_.-`, not starting with a dot); no other can exist."""
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id):
        raise UnknownSessionError(session_id, root if root is not None else paths.sessions_root())
    return session_id


def resolve_root(root: Path | None) -> Path:
    """The sessions root (made 0700 with any missing parents)."""
    return make_private_dirs(Path(root) if root is not None else paths.sessions_root())


def create_session_dir(root: Path, session_id: str) -> Path:
    """Make `<root>/<id>` (0700) and its artifacts dir; SessionExistsError if it is there already."""
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id):
        raise InputError("bad_args", f"bad session id {session_id!r}: letters, digits and _.- only", field="session_id")
    directory = root / session_id
    try:
        os.mkdir(directory, PRIVATE_DIR_MODE)
    except FileExistsError:
        raise SessionExistsError(session_id, root) from None
    os.mkdir(directory / ARTIFACTS_NAME, PRIVATE_DIR_MODE)
    return directory


def open_session_dir(root: Path, session_id: str) -> Path:
    """The dir of an existing session, set to 0700 (an older eukhe may have made it with the umask)."""
    directory = root / check_session_id(session_id, root)
    if not (directory / JOURNAL_NAME).is_file():
        raise UnknownSessionError(session_id, root)
    try:
        os.chmod(directory, PRIVATE_DIR_MODE)
    except OSError as error:
        raise SessionOpenError(directory, error.strerror or str(error)) from error
    make_private_dirs(directory / ARTIFACTS_NAME)
    return directory


def saved_header(root: Path, session_id: str) -> SessionHeader:
    """A saved session's header, read from the first line of its journal only (the journal is not parsed).
    UnknownSessionError if there is no such session; JournalFormatError if another build's format wrote it."""
    path = root / check_session_id(session_id, root) / JOURNAL_NAME
    try:
        header = read_header(path)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):  # no such session
        header = None
    except OSError as error:  # the session may well exist: say why it cannot be read, never "no session"
        if resource_shortage(error) is not None:
            raise  # EMFILE, ENOSPC...: `resource_exhausted` at the daemon's request boundary
        raise SessionOpenError(path, error.strerror or str(error)) from error
    if header is None:
        raise UnknownSessionError(session_id, root)
    return header


def saved_session_ids(root: Path) -> list[str]:
    """The ids of the saved sessions under `root` (each a dir with a journal), in id order."""
    if not root.is_dir():
        return []
    return sorted(
        entry.name
        for entry in root.iterdir()
        if not entry.name.startswith(".") and _ID.fullmatch(entry.name) and (entry / JOURNAL_NAME).is_file()
    )


def write_staged_session(root: Path, session_id: str, commits: Sequence[Sequence[JournalRecord]]) -> Path:
    """Write a new session's journal in a private staging dir (0700, file 0600), then rename it into place."""
    check_session_id(session_id, root)
    staging = root / f"{STAGING_PREFIX}{secrets.token_hex(6)}"
    os.mkdir(staging, PRIVATE_DIR_MODE)
    try:
        os.mkdir(staging / ARTIFACTS_NAME, PRIVATE_DIR_MODE)
        fd = create_private_file(staging / JOURNAL_NAME)
        try:
            write_all(fd, b"".join(encode_commit(seq, records) for seq, records in enumerate(commits, start=1)))
            os.fsync(fd)
        finally:
            os.close(fd)
        target = root / session_id
        if target.exists():
            raise SessionExistsError(session_id, root)
        os.rename(staging, target)
        fsync_dir(root)  # the fork's name is durable once this returns
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def remove_session(root: Path, session_id: str) -> list[str]:
    """Remove a saved session: its dir (journal, artifacts) and its workspaces dir (its isolated children's copies,
    `paths.workspaces_root(root)/<id>`); the paths removed. The session dir is first renamed out of the way, so a
    crash midway never leaves half a session under its name (what it leaves, `remove_leftovers` removes)."""
    directory = root / check_session_id(session_id, root)
    removed: list[str] = []
    if directory.is_dir():
        mounts.release_below(directory)  # a private /tmp's tmpfs a worker that died left mounted
        doomed = root / f"{DELETING_PREFIX}{session_id}-{secrets.token_hex(4)}"
        os.rename(directory, doomed)
        fsync_dir(root)  # the session is gone once this returns
        shutil.rmtree(doomed, ignore_errors=True)
        removed.append(str(directory))
    workspaces = paths.workspaces_root(root) / session_id
    if workspaces.is_dir() and not workspaces.is_symlink():
        shutil.rmtree(workspaces, ignore_errors=True)
        removed.append(str(workspaces))
    return removed


def remove_leftovers(root: Path) -> list[str]:
    """Remove what a crash left under the sessions root: dirs of deletes cut midway; the paths removed."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for entry in root.iterdir():
        if entry.name.startswith(DELETING_PREFIX) and entry.is_dir() and not entry.is_symlink():
            mounts.release_below(entry)
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(str(entry))
    return removed
