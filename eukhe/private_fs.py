"""Private files and directories, made with their final mode at creation ("Local access" 3).

The mode is passed to mkdir/open, never set by a later chmod, so there is no moment when another user could open
what eukhe made. The modes themselves come from the core.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from eukhe.core.fsmode import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, CwdFact, CwdOpens, judge_cwd
from eukhe.errors import EukheError, PathError
from eukhe.fsio import write_all


class WorkingDirError(EukheError):
    """A session's working directory was refused; the message is the spec's exact text."""

    code = "working_dir_error"

    def __init__(self, text: str, path: str | None, field: str = "cwd") -> None:
        super().__init__(text)
        self.text = text
        self.path = path
        self.field = field


def make_private_dirs(path: Path) -> Path:
    """Create `path` and any missing parents with mode 0700 each, in one step per directory."""
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        # Another process may make it first; its maker chose the mode.
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, PRIVATE_DIR_MODE)
    return path


def open_private_file(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """Open `path`, creating it with mode 0600 if it does not exist; returns a file descriptor."""
    return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)


def write_private_file(path: Path, data: bytes) -> None:
    """Write `data` as a new file with mode 0600 (it must not exist yet), its directory made private if missing."""
    make_private_dirs(path.parent)
    fd = create_private_file(path)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def create_private_file(path: Path) -> int:
    """Create a new file with mode 0600 (it must not exist yet); returns a write-only descriptor."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE)


def cwd_fact(path: str | os.PathLike[str] | None, field: str = "cwd") -> CwdFact:
    """Read what is at a proposed working directory (following symlinks), for the core's verdict. A path the OS
    cannot look at (too long, a symlink loop, no permission, a NUL byte) is a PathError that names it."""
    if path is None or os.fspath(path) == "":
        return CwdFact.NONE
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return CwdFact.MISSING
    except OSError as error:
        raise PathError(os.fspath(path), error.strerror or str(error), field=field) from None
    except ValueError:  # "embedded null byte"
        raise PathError(os.fspath(path), "it holds a NUL byte", field=field) from None
    return CwdFact.DIR if stat.S_ISDIR(mode) else CwdFact.NOT_DIR


def check_working_dir(path: str | os.PathLike[str] | None, *, absolute: bool = False, field: str = "cwd") -> Path:
    """Return the working dir as an absolute path, or raise WorkingDirError with the spec's text (`field` names the
    input it came from). With `absolute` (a request from another process, whose own directory means nothing here)
    a relative path is refused too."""
    if absolute and path is not None and os.fspath(path) and not os.path.isabs(path):
        text = f"working directory must be an absolute path: {os.fspath(path)!r}"
        raise WorkingDirError(text, os.fspath(path), field)
    verdict = judge_cwd(cwd_fact(path, field))
    if isinstance(verdict, CwdOpens):
        assert path is not None
        return Path(os.path.abspath(path))
    raise WorkingDirError(verdict.text, None if path is None else os.fspath(path), field)
