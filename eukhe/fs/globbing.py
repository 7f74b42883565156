"""`fs.glob`: the files under a directory whose relative path matches a glob.

The pattern is relative to `path` and matched component by component:
- `*` matches any run of characters within one name, `?` one character, `[abc]` / `[!abc]` a class (no escapes);
- `**` as a whole component matches zero or more directories (`**/*.py`, `a/**/b`); at the end it matches every
  file below (`src/**` is `src/**/*`);
- a name starting with `.` is matched only by a component that starts with a literal `.`, and never by `**`
  (so `*` skips hidden files, `.github/**` finds the workflows);
- only regular files are listed, never directories, symlinks or special files; `.gitignore` files apply as in
  `fs.grep` (`eukhe.fs.walk`), and an ignored file or directory is never listed or entered.
Results come in the walk's order (sorted by path, component by component) and are bounded like every output, one
per line: a path holding a control character (a newline) or starting with `"` is written quoted, C-style
(`eukhe.core.pathquote`).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from eukhe.core.pathmap import Kind
from eukhe.core.pathquote import quote_path
from eukhe.fs.context import FsContext, Locator, bounded_fields
from eukhe.fs.errors import FsError, Reason
from eukhe.fs.opening import refused
from eukhe.fs.walk import Admit, Rules, Verdict, ignored, walk
from eukhe.records.fs import GlobAnswer, GlobArgs

ANY_DIRS = "**"


@dataclass(frozen=True, slots=True)
class Component:
    """One component of a glob: its regex, and whether it starts with a literal dot (so it may match hidden names)."""

    regex: re.Pattern[str]
    dotted: bool

    def matches(self, name: str) -> bool:
        if name.startswith(".") and not self.dotted:
            return False
        return self.regex.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class GlobPattern:
    """A parsed glob: a small automaton over path components (a state is how many components are matched)."""

    components: tuple[Component | str, ...]  # a Component, or ANY_DIRS

    @classmethod
    def parse(cls, pattern: str) -> GlobPattern:
        """The glob's components; `invalid_pattern` for an empty, absolute or `..` pattern, or one ending in `/`."""
        if not pattern or pattern.startswith("/") or pattern.endswith("/") or "\0" in pattern:
            raise FsError(
                Reason.INVALID_PATTERN, None, f"a glob must be a non-empty relative file pattern, got {pattern!r}"
            )
        components: list[Component | str] = []
        for part in pattern.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                raise FsError(Reason.INVALID_PATTERN, None, f"a glob cannot climb out of its path: {pattern!r}")
            if part == ANY_DIRS:
                if not components or components[-1] != ANY_DIRS:
                    components.append(ANY_DIRS)
                continue
            components.append(Component(re.compile(fnmatch.translate(part)), part.startswith(".")))
        if not components:
            raise FsError(Reason.INVALID_PATTERN, None, f"a glob must name files, got {pattern!r}")
        if components[-1] == ANY_DIRS:  # `a/**` is everything below a, not a itself: `a/**/*`
            components.append(Component(re.compile(fnmatch.translate("*")), False))
        return cls(tuple(components))

    def _closure(self, states: set[int]) -> frozenset[int]:
        todo = list(states)
        while todo:
            state = todo.pop()
            if state < len(self.components) and self.components[state] == ANY_DIRS and state + 1 not in states:
                states.add(state + 1)
                todo.append(state + 1)
        return frozenset(states)

    def start(self) -> frozenset[int]:
        """The states before any component."""
        return self._closure({0})

    def step(self, states: frozenset[int], name: str) -> frozenset[int]:
        """The states after one more name."""
        after: set[int] = set()
        for state in states:
            if state == len(self.components):
                continue
            component = self.components[state]
            if isinstance(component, str):
                if not name.startswith("."):
                    after.add(state)
            elif component.matches(name):
                after.add(state + 1)
        return self._closure(after)

    def accepts(self, states: frozenset[int]) -> bool:
        """Whether a path that reached these states matches."""
        return len(self.components) in states

    def alive(self, states: frozenset[int]) -> bool:
        """Whether some longer path could still match (a directory worth entering)."""
        return any(state < len(self.components) for state in states)

    def matches(self, relative: str) -> bool:
        """Whether a relative path matches (the same rule the walk uses, for one path)."""
        states = self.start()
        for name in relative.split("/"):
            states = self.step(states, name)
        return self.accepts(states)


def glob_policy(pattern: GlobPattern) -> Admit:
    """The walk's policy: .gitignore first, then the automaton (directories entered while they can still match)."""
    seen: dict[str, frozenset[int]] = {"": pattern.start()}

    def admit(relative: str, name: str, is_dir: bool, stack: list[Rules]) -> bool:
        if ignored(stack, relative, is_dir) is Verdict.EXCLUDE:
            return False
        parent = relative.rpartition("/")[0]
        states = pattern.step(seen[parent], name)
        if is_dir:
            seen[relative] = states
            return pattern.alive(states)
        return pattern.accepts(states)

    return admit


def glob(context: FsContext, args: GlobArgs) -> GlobAnswer:
    """The files under `path` whose path relative to it matches `pattern`."""
    if not isinstance(args.pattern, str):
        raise FsError(Reason.BAD_REQUEST, None, f"pattern must be a string, got {type(args.pattern).__name__}")
    pattern = GlobPattern.parse(args.pattern)
    place = Locator(context).place(args.path, "list")
    if place.kind is Kind.MISSING:
        raise FsError(Reason.NOT_FOUND, place.asked, f"cannot list {place.asked}: no such directory")
    if place.kind is not Kind.DIR:
        raise FsError(Reason.NOT_A_DIRECTORY, place.asked, f"cannot list {place.asked}: not a directory")
    output = context.bounded("fs-glob")
    count = 0
    try:
        for found in walk(place.host, glob_policy(pattern), context.hidden_below(place.host)):
            output.write(quote_path(found.relative).encode("utf-8", errors="surrogateescape") + b"\n")
            count += 1
    except OSError as error:
        raise refused(error, place.asked, "list") from error
    finally:
        result = output.close()
    return GlobAnswer(absolute=place.shown, count=count, **bounded_fields(result))
