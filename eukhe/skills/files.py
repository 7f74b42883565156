"""A skill's files, read as files from a place a confined job can write must be read (docs/skills.md, "Reading a
skill's files").

A skill's directory is opened once, as a descriptor: a user's skill as the user laid it out (a symlinked root or
skill directory is the user's own and is followed), a project's skill from the working directory following no
symlink. Inside it the rules are the same for both: a file is read with `eukhe.beneath.read_regular` (no symlink
followed, a FIFO never waited on, a regular file only, within a cap), and the listing enters real directories only
and lists regular files only, so that a file linked to `~/.ssh/id_ed25519`, a FIFO or `/dev/zero` is never read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from eukhe.beneath import NotRegularError, TooLargeError, open_dir, read_regular

SKILL_FILE = "SKILL.md"
SKILL_FILE_CAP = 1 << 20
"""SKILL.md is read only up to 1 MiB (its instructions are meant to stay short); a larger one makes the skill
invalid."""
FILE_CAP = 8 << 20
"""Any other file of a skill is read (served as a resource, hashed into the fingerprint) only up to 8 MiB."""
MAX_FILES = 1000
"""At most this many files of one skill are offered as resources (a skill is a few files, not a tree)."""
MAX_ENTRIES = 20 * MAX_FILES
"""At most this many directory entries are looked at to list one skill's files (a huge tree does not stall it)."""
SKIPPED_DIRS = frozenset({".git", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"})
"""Directories inside a skill whose files are not the skill's (caches, a checkout's metadata, environments)."""
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class SkillDir:
    """A skill's directory and how it is reached: `base` is the working directory a project's skill is reached
    from, following no symlink (None: a user's skill, reached as the user laid it out)."""

    path: str
    base: str | None = None

    @contextmanager
    def opened(self) -> Iterator[int]:
        """The directory as a descriptor (`OSError`, `ELOOP` for a project's path through a symlink)."""
        fd = self._open()
        try:
            yield fd
        finally:
            os.close(fd)

    def _open(self) -> int:
        if self.base is None:
            return os.open(self.path, _DIRECTORY)
        base = os.open(self.base, _DIRECTORY)
        try:
            return open_dir(os.path.relpath(self.path, self.base), dir_fd=base)
        finally:
            os.close(base)

    def files(self) -> list[str]:
        """The skill's files (see `list_files`)."""
        with self.opened() as fd:
            return list_files(fd)

    def read(self, relative: str, cap: int = FILE_CAP) -> bytes:
        """One file's bytes (see `read_regular`): `ELOOP` for a symlink, `NotRegularError`, `TooLargeError`."""
        with self.opened() as fd:
            return read_regular(relative, cap, dir_fd=fd)


def is_regular(dir_fd: int, name: str) -> bool:
    """Whether `name` in the directory is a regular file itself (a symlink to one is not)."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def exists(dir_fd: int, name: str) -> bool:
    """Whether the directory holds an entry `name`, of any kind (a symlink is not followed)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _skipped_dir(name: str) -> bool:
    return name in SKIPPED_DIRS or name.startswith(".") or name.endswith(".egg-info")


def _skipped_file(name: str) -> bool:
    return name.startswith(".") or name.endswith(".pyc")


def list_files(dir_fd: int) -> list[str]:
    """The regular files of the skill whose directory `dir_fd` is, relative to it: SKILL.md first, then sorted;
    hidden entries and caches left out, a symlink (to a file or a directory), a FIFO or a device never listed, a
    symlinked directory never entered; at most `MAX_FILES`, from at most `MAX_ENTRIES` entries looked at."""
    found: list[str] = []
    pending = [""]
    budget = MAX_ENTRIES
    while pending and budget > 0:
        relative = pending.pop()
        try:
            entries = _entries(dir_fd, relative, budget)
        except OSError:
            continue  # gone, or swapped for a symlink since it was listed: not entered
        budget -= len(entries)
        below: list[str] = []
        for name, kind in entries:
            path = f"{relative}/{name}" if relative else name
            if kind == "dir" and not _skipped_dir(name):
                below.append(path)
            elif kind == "file" and not _skipped_file(name):
                found.append(path)
        pending.extend(reversed(below))
    found.sort(key=lambda rel: (rel != SKILL_FILE, rel))
    return found[:MAX_FILES]


def _entries(dir_fd: int, relative: str, budget: int) -> list[tuple[str, str]]:
    """The entries of one directory of the skill (opened following no symlink), by name, at most `budget`: each
    name and its kind, `dir`, `file` (regular) or `other` (a symlink is `other`), told while the directory is
    open."""
    fd = open_dir(relative or ".", dir_fd=dir_fd)
    try:
        taken: list[tuple[str, str]] = []
        with os.scandir(fd) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    kind = "dir"
                elif entry.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "other"
                taken.append((entry.name, kind))
                if len(taken) >= budget:
                    break
        return sorted(taken)
    finally:
        os.close(fd)


def refusal(error: OSError, cap: int) -> str:
    """Why a skill's file was not read, in a few words."""
    if isinstance(error, TooLargeError):
        return f"larger than {cap} bytes: not read"
    if isinstance(error, NotRegularError):
        return "not a regular file (a FIFO, a device, a socket or a directory): not read"
    if error.errno == errno.ELOOP:
        return "a symlink: not followed (a skill's files are read only as regular files inside its directory)"
    return error.strerror or str(error)
