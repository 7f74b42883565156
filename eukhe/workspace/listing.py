"""Which files a workspace copy holds (spec S3 "A subagent's workspace" 2).

At spawn: the tracked and the untracked-but-not-ignored files of the parent's directory, from
`git ls-files -co --exclude-standard -z` in a git work tree; without git, the files its `.gitignore` files (at every
level) do not ignore, matched by pathspec's `GitIgnoreSpec`. At the hand-back, the child's copy is listed with its
`.gitignore` files only: `.git/info/exclude` and global excludes do not apply there (the copy has no `.git`).

Never listed: `.git` (a directory or a worktree's file), anything inside an ignored directory, and anything that is
not a regular file or a symlink (a symlink is listed as itself, never followed).
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from eukhe.beneath import NotRegularError, TooLargeError, read_regular
from eukhe.workspace.errors import ListingError, WorkspaceTooLargeError

MAX_WORKSPACE_FILES = 100_000
"""More files than this: no isolated copy; the spawn fails and names workspace="shared"."""

GIT_DIR_NAME = ".git"
GITIGNORE = ".gitignore"


def list_workspace(directory: Path, max_files: int = MAX_WORKSPACE_FILES) -> list[str]:
    """The relative paths to copy from `directory`, sorted; WorkspaceTooLargeError past `max_files`."""
    listed = git_listing(directory)
    if listed is None:
        listed = [path for path, _ in walk_gitignored(directory, max_files)]
    if len(listed) > max_files:
        raise WorkspaceTooLargeError(str(directory), len(listed), max_files)
    return sorted(listed)


def git_listing(directory: Path) -> list[str] | None:
    """`git ls-files -co --exclude-standard -z` in `directory`; None when it is not in a git work tree (or no git).

    Entries git lists as directories (a nested repository, `name/`) are left out: another repository is not part of
    this one's files.
    """
    # Untranslated messages: a directory outside every work tree is known by git's own words, in any locale.
    env = {name: value for name, value in os.environ.items() if name != "LANGUAGE"}
    env["LC_ALL"] = "C"
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        return None  # no git on this machine: the .gitignore walk lists the files
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip()
        if "not a git repository" in error:
            return None
        raise ListingError(str(directory), f"git ls-files: {error}")
    seen: set[str] = set()
    for raw in done.stdout.split(b"\0"):
        if raw and not raw.endswith(b"/"):
            seen.add(os.fsdecode(raw))
    return [path for path in seen if GIT_DIR_NAME not in path.split("/")]


@dataclass(frozen=True, slots=True)
class _Rules:
    """The .gitignore of one directory: its patterns apply to paths relative to `prefix` (that directory)."""

    prefix: str
    spec: pathspec.GitIgnoreSpec


GITIGNORE_CAP = 1 << 20
"""The largest `.gitignore` read; a larger one is not read (as a symlink, a FIFO or a device is not)."""


def _read_rules(root: Path, relative_dir: str, prefix: str) -> _Rules | None:
    """The rules of `root/relative_dir/.gitignore`, if it is a regular file: read as `eukhe.beneath.read_regular`
    reads (no symlink followed below `root`, never blocking, within GITIGNORE_CAP), since a job may have planted it."""
    relative = f"{relative_dir}/{GITIGNORE}" if relative_dir else GITIGNORE
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            data = read_regular(relative, GITIGNORE_CAP, dir_fd=root_fd)
        finally:
            os.close(root_fd)
    except (NotRegularError, TooLargeError):
        return None
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return None  # absent, or a symlink on the way (git does not follow a symlinked .gitignore either)
        raise ListingError(str(root), f"cannot read {root / relative}: {error.strerror}") from error
    return _Rules(prefix, pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", "surrogateescape").splitlines()))


def ignored(rules: tuple[_Rules, ...], path: str) -> bool:
    """Whether `path` (a directory's path ends with "/") is ignored: the deepest .gitignore that decides wins."""
    for rule in reversed(rules):
        decided = rule.spec.check_file(path[len(rule.prefix) :]).include
        if decided is not None:
            return decided
    return False


class GitignoreRules:
    """The .gitignore files of one tree, each read once: the rules in force inside each directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._chains: dict[str, tuple[_Rules, ...]] = {}

    def chain(self, relative_dir: str) -> tuple[_Rules, ...]:
        """The rules in force inside `relative_dir` ("" is the root): its ancestors' .gitignore files and its own."""
        if relative_dir not in self._chains:
            if relative_dir:
                above = self.chain(relative_dir.rpartition("/")[0])
                own = _read_rules(self.root, relative_dir, relative_dir + "/")
            else:
                above, own = (), _read_rules(self.root, "", "")
            self._chains[relative_dir] = above if own is None else (*above, own)
        return self._chains[relative_dir]


def walk_gitignored(
    directory: Path, max_files: int | None = None, *, start: str = "", rules: GitignoreRules | None = None
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every regular file and symlink under `directory` (from its subdirectory `start`) that its .gitignore files do
    not ignore, with its DirEntry.

    Stops with WorkspaceTooLargeError once it has yielded more than `max_files` (None: no limit). Does not descend
    into ignored directories, `.git`, or symlinks.
    """
    rules = rules or GitignoreRules(directory)
    found = 0
    stack = [start]
    while stack:
        here = stack.pop()
        chain = rules.chain(here)
        prefix = here + "/" if here else ""
        try:
            entries = list(os.scandir(directory / here))
        except OSError as error:
            raise ListingError(str(directory), f"cannot read {directory / here}: {error.strerror}") from error
        for entry in entries:
            if entry.name == GIT_DIR_NAME:
                continue
            relative = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if not ignored(chain, relative + "/"):
                    stack.append(relative)
            elif (entry.is_file(follow_symlinks=False) or entry.is_symlink()) and not ignored(chain, relative):
                found += 1
                if max_files is not None and found > max_files:
                    raise WorkspaceTooLargeError(str(directory), found, max_files)
                yield relative, entry
