"""The walk of a directory tree shared by `fs.grep`'s Python engine and `fs.glob`: ripgrep's rules, written down.

The rules (the ones `rg` follows with the flags `eukhe.fs.grepping` gives it):
- Order: each directory's entries sorted by name as bytes, a subdirectory walked where its name sorts (depth first).
  This is "sorted by path", comparing paths component by component.
- Symlinks are not followed, and neither are FIFOs, sockets or devices: only regular files and directories count.
- `.gitignore` files apply in the directory that holds them and below, from the walk's root down (not above it, and
  with or without a `.git` directory). The deepest `.gitignore` with a pattern that matches decides; within a file,
  the last matching pattern; `!pattern` re-includes. A pattern matches the path itself (relative to its file's
  directory), not its parents: an ignored directory is simply not entered. `{a,b}` groups are alternatives (a line
  with a nested or unclosed group is skipped). `.ignore`, `.rgignore`, the global gitignore and `.git/info/exclude`
  are not read.
- Hidden entries (names starting with `.`) are skipped, unless a `.gitignore` pattern re-includes them.
- A grep `glob` (an override, gitignore syntax) is checked first: a file it matches is searched even when hidden or
  ignored; `!glob` excludes what it matches; with a positive glob, a file it does not match is skipped.
  Directories are entered unless a glob or the rules above exclude them.
- Unreadable directories below the root are skipped, and so are directories more than MAX_DEPTH levels down.
- The walk follows no symlink, also none swapped in while it runs: each directory is opened from the descriptor of
  the one above it with `O_NOFOLLOW`, each file is yielded with the descriptor of its directory, and a `.gitignore`
  is read only as a regular file (not through a symlink, not a FIFO or a device), within GITIGNORE_CAP.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pathspec

from eukhe.beneath import open_dir, read_regular
from eukhe.core.pathmap import is_within
from eukhe.fs.errors import FsError, Reason


class Verdict(enum.Enum):
    """What a rule says about an entry."""

    INCLUDE = "include"  # matched by a re-including rule (or an override glob)
    EXCLUDE = "exclude"  # matched by an excluding rule
    NONE = "none"  # no rule matched


_PARENT_OR_SELF = "(?:(?P<ps_d>/)|$)"  # how pathspec ends a pattern that matches a path or anything below it
_DIRECTORY = "(?P<ps_d>/)"  # how pathspec ends a pattern that matches a directory or anything below it


def exact(regex: re.Pattern[str]) -> re.Pattern[str]:
    """A pathspec gitignore regex that matches a path itself, never because one of its parents matches.

    pathspec searches `path` (a directory as `path/`) with a regex that also matches everything below a matched
    directory; its tail marks where. Here the tail must be the end: what ripgrep does, as it never enters an ignored
    directory and matches each path on its own. Patterns without the tail (`x/**`, `*`) match by design what is below.
    """
    source = regex.pattern.replace(_PARENT_OR_SELF, "/?\\Z").replace(_DIRECTORY, "/\\Z")
    if "ps_d" in source:
        raise ValueError(f"pathspec wrote a regex this walk does not know: {regex.pattern!r}")
    return re.compile(source)


def expand_braces(pattern: str) -> list[str] | None:
    """The alternatives of a glob with `{a,b}` groups (ripgrep's globs have them; gitignore syntax does not), or None
    for a nested or unclosed group, which ripgrep refuses. `\\{` and a `{` inside `[...]` are literal."""
    alternatives = [""]
    group: list[str] | None = None  # the alternatives of the open group, the last one being written
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        piece = pattern[index : index + 2] if char == "\\" else char
        index += len(piece)
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "{":
            if group is not None:
                return None
            group = [""]
            continue
        elif char == "," and group is not None:
            group.append("")
            continue
        elif char == "}" and group is not None:
            alternatives = [done + choice for done in alternatives for choice in group]
            group = None
            continue
        if group is not None:
            group[-1] += piece
        else:
            alternatives = [done + piece for done in alternatives]
    return None if group is not None else alternatives


@dataclass(frozen=True, slots=True)
class Rules:
    """One gitignore-syntax pattern list, relative to `base` (a walk-relative directory, '' for the root)."""

    base: str
    patterns: tuple[tuple[bool, re.Pattern[str], bool], ...]  # (excludes, exact regex, by_dir), in file order

    @classmethod
    def parse(cls, base: str, lines: list[str]) -> Rules:
        """The patterns of gitignore-syntax lines (comments and blank lines dropped; `{a,b}` groups expanded into
        one pattern each, as ripgrep reads them; a line with a nested or unclosed group skipped, as ripgrep does)."""
        expanded: list[str] = []
        for line in lines:
            alternatives = [line] if line.startswith("#") else expand_braces(line)
            expanded.extend(alternatives or [])
        spec = pathspec.GitIgnoreSpec.from_lines(expanded)
        patterns = tuple(
            (bool(pattern.include), exact(pattern.regex), _DIRECTORY in pattern.regex.pattern)
            for pattern in spec.patterns
            if pattern.include is not None and isinstance(pattern.regex, re.Pattern)
        )
        return cls(base, patterns)

    def verdict(self, relative: str, is_dir: bool) -> Verdict:
        """The last matching pattern's verdict on a walk-relative path under `base`."""
        inner = relative[len(self.base) + 1 :] if self.base else relative
        for excludes, regex, by_dir in reversed(self.patterns):
            # A directory is matched as `dir/` by the patterns that tell directories apart (`x`, `x/`), and as
            # `dir` by the others (`x/**` matches what is below x, not x itself).
            if regex.search(inner + "/" if is_dir and by_dir else inner) is not None:
                return Verdict.EXCLUDE if excludes else Verdict.INCLUDE
        return Verdict.NONE


@dataclass(frozen=True, slots=True)
class Override:
    """A grep `glob`: `GLOB` selects files (directories are still entered), `!GLOB` excludes what it matches."""

    rules: Rules
    negated: bool

    @classmethod
    def parse(cls, glob: str) -> Override:
        """The override of one glob; a nested or unclosed `{` group is `invalid_pattern`, as ripgrep refuses it."""
        negated = glob.startswith("!")
        body = glob[1:] if negated else glob
        if expand_braces(body) is None:
            raise FsError(Reason.INVALID_PATTERN, None, f"the glob {glob!r} has a nested or unclosed {{ group")
        return cls(Rules.parse("", [body]), negated)

    def verdict(self, relative: str, is_dir: bool) -> Verdict:
        if self.rules.verdict(relative, is_dir) is Verdict.EXCLUDE:  # the pattern matched
            return Verdict.EXCLUDE if self.negated else Verdict.INCLUDE
        if not self.negated and not is_dir:
            return Verdict.EXCLUDE
        return Verdict.NONE


GITIGNORE_CAP = 1 << 20
"""The largest `.gitignore` read; a larger one is not read (as a symlink, a FIFO or a device is not)."""


def read_gitignore(directory: int, base: str) -> Rules | None:
    """The `.gitignore` of an open directory, or None: it is read only as a regular file, not through a symlink
    (git does not follow one either), without blocking, within GITIGNORE_CAP."""
    try:
        data = read_regular(".gitignore", GITIGNORE_CAP, dir_fd=directory)
    except OSError:
        return None
    return Rules.parse(base, data.decode("utf-8", errors="surrogateescape").splitlines())


def ignored(stack: list[Rules], relative: str, is_dir: bool) -> Verdict:
    """The verdict of the deepest `.gitignore` that has a matching pattern."""
    for rules in reversed(stack):
        found = rules.verdict(relative, is_dir)
        if found is not Verdict.NONE:
            return found
    return Verdict.NONE


Admit = Callable[[str, str, bool, list[Rules]], bool]
"""A walk's policy: (relative path, name, is_dir, the .gitignore stack) -> whether to enter or yield it."""


def grep_policy(override: Override | None) -> Admit:
    """ripgrep's rule for its walk: override glob, then .gitignore, then hidden."""

    def admit(relative: str, name: str, is_dir: bool, stack: list[Rules]) -> bool:
        if override is not None:
            found = override.verdict(relative, is_dir)
            if found is not Verdict.NONE:
                return found is Verdict.INCLUDE
        found = ignored(stack, relative, is_dir)
        if found is not Verdict.NONE:
            return found is Verdict.INCLUDE
        return not name.startswith(".")

    return admit


def _sort_key(entry: os.DirEntry[str]) -> bytes:
    return os.fsencode(entry.name)


MAX_DEPTH = 256
"""Directories deeper than this below a walk's root are not entered (each level holds a descriptor open)."""


@dataclass(frozen=True, slots=True)
class Found:
    """A regular file the walk admits: its root-relative path, and its name in the open directory `dir_fd` (valid
    until the walk goes on), through which it is opened."""

    relative: str
    dir_fd: int
    name: str


def walk(root: str, admit: Admit, hidden: tuple[str, ...] = ()) -> Iterator[Found]:
    """The regular files under the host directory `root` (symlink-free) the policy admits, in order. Every directory
    is opened from the one above it, following no symlink: one swapped for a symlink since it was listed is not
    entered. What lies under a `hidden` host path (the sandbox's denied paths) is neither entered nor yielded."""
    stack: list[Rules] = []

    def visit(directory: int, relative: str, depth: int) -> Iterator[Found]:
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=_sort_key)
        except OSError:
            if not relative:
                raise
            return
        rules = read_gitignore(directory, relative)
        if rules is not None:
            stack.append(rules)
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir and not is_file:
                continue
            path = f"{relative}/{entry.name}" if relative else entry.name
            if hidden and any(is_within(f"{root}/{path}", denied) for denied in hidden):
                continue
            if not admit(path, entry.name, is_dir, stack):
                continue
            if not is_dir:
                yield Found(path, directory, entry.name)
                continue
            if depth >= MAX_DEPTH:
                continue
            try:
                inner = os.open(entry.name, WALK_DIR_FLAGS, dir_fd=directory)
            except OSError:
                continue  # gone, unreadable, or a symlink by now
            try:
                yield from visit(inner, path, depth + 1)
            finally:
                os.close(inner)
        if rules is not None:
            stack.pop()

    top = open_dir(root)
    try:
        yield from visit(top, "", 0)
    finally:
        os.close(top)


WALK_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
