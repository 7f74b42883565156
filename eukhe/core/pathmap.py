"""Sandbox <-> host path maps and the `outside` rule (spec S3 "Where the sandbox runs").

A wrapped kernel sees the host's files through mounts: `{sandbox, host}` pairs of absolute POSIX directories. The
host serves the kernel's `fs.*` requests, so every path in a request is a sandbox path the host must map, and every
path in a reply is a host path it must map back.

Theory of operation.
- `PathMap.host_of(sandbox_path)`: the deepest mount whose sandbox dir holds the (lexically normalised) path maps
  it. None holds it: `Outside`.
- `PathMap.sandbox_of(host_path)`: the deepest mount whose host dir holds the path maps it back, unless a deeper
  sandbox mount shadows the result (then the next candidate, or `Outside`). So `host_of(sandbox_of(h)) == h`
  whenever `sandbox_of(h)` is a path.
- `to_host(path, cwd)`: a request path, relative ones against the sandbox cwd; `~` and `~/...` (the sandbox home,
  which the host cannot know) are `Outside`.
- `resolve(path, cwd, look)`: the same, checked against the host disk. The walk goes component by component in
  sandbox space, asking the shell what is at each host path (`look`). A symlink is followed as the host follows it:
  its target is a host path (a relative one starts at the link's host directory), resolved on the host disk by the
  same walk under the identity map, then shown in the sandbox through the mounts; a target no mount shows is
  `Outside`. `..` is the parent of what the walk resolved so far, which holds no symlink, so it is the lexical
  parent there (a `..` right after a symlink is the parent of its target, as on a disk). Below a missing component
  the rest is taken lexically, as `os.path.realpath` does. The answer is a symlink-free sandbox path and its host
  path: what the host opens is what was checked.

Paths are text; the core never touches a disk. The Local transport is the identity map (`/` -> `/`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

MAX_LINKS = 40
"""Symlinks followed in one walk before it is refused as a loop (Linux's own limit)."""


def split(path: str) -> list[str]:
    """The names of a path, without empty and `.` components."""
    return [part for part in path.split("/") if part not in ("", ".")]


def normalize(path: str) -> str:
    """An absolute path with `.`, empty and `..` components resolved lexically (`..` at the root stays there)."""
    if not path.startswith("/"):
        raise ValueError(f"not an absolute path: {path!r}")
    parts: list[str] = []
    for part in split(path):
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    return "/" + "/".join(parts)


def is_within(path: str, root: str) -> bool:
    """Whether the normalised `path` is `root` or below it (both normalised)."""
    return root in ("/", path) or path.startswith(root + "/")


def rebase(path: str, old_root: str, new_root: str) -> str:
    """`path` (within `old_root`) moved under `new_root`."""
    rest = path[len(old_root) :].lstrip("/") if old_root != "/" else path.lstrip("/")
    if not rest:
        return new_root
    return new_root.rstrip("/") + "/" + rest


def is_home(path: str) -> bool:
    """Whether a request path names the sandbox home: `~` or `~/...` (a name like `~x` is a plain relative name)."""
    return path == "~" or path.startswith("~/")


@dataclass(frozen=True, slots=True)
class Mount:
    """A sandbox directory and the host directory it shows (both absolute; stored normalised)."""

    sandbox: str
    host: str

    def __post_init__(self) -> None:
        for side in (self.sandbox, self.host):
            if not isinstance(side, str) or not side.startswith("/") or "\0" in side:
                raise ValueError(f"a mount needs absolute paths without NUL, got {self!r}")
        object.__setattr__(self, "sandbox", normalize(self.sandbox))
        object.__setattr__(self, "host", normalize(self.host))


@dataclass(frozen=True, slots=True)
class Outside:
    """A path no mount holds (or one the sandbox cannot name): the `outside` refusal, with the reason."""

    path: str
    why: str


def _depth(path: str) -> int:
    return len(split(path))


@dataclass(frozen=True, slots=True)
class PathMap:
    """The mounts of a wrapped kernel. The deepest mount that holds a path maps it, in either direction."""

    mounts: tuple[Mount, ...]

    def __post_init__(self) -> None:
        sandboxes = [mount.sandbox for mount in self.mounts]
        if len(set(sandboxes)) != len(sandboxes):
            raise ValueError(f"two mounts share a sandbox path: {sandboxes}")

    @classmethod
    def identity(cls) -> PathMap:
        """The Local transport's map: every host path is itself."""
        return cls((Mount("/", "/"),))

    def mount_for_sandbox(self, sandbox_path: str) -> Mount | None:
        """The deepest mount whose sandbox dir holds the normalised path, or None."""
        holding = [mount for mount in self.mounts if is_within(sandbox_path, mount.sandbox)]
        return max(holding, key=lambda mount: _depth(mount.sandbox), default=None)

    def host_of(self, sandbox_path: str) -> str | Outside:
        """The host path of an absolute sandbox path, or `Outside` when no mount holds it."""
        path = normalize(sandbox_path)
        mount = self.mount_for_sandbox(path)
        if mount is None:
            return Outside(path, "no mount holds it")
        return rebase(path, mount.sandbox, mount.host)

    def sandbox_of(self, host_path: str) -> str | Outside:
        """The sandbox path that shows an absolute host path, or `Outside` when no mount shows it.

        Candidates are the mounts whose host dir holds the path, deepest first (ties in the listed order); the first
        whose sandbox path maps back to the same host path wins (a deeper sandbox mount can hide a host path).
        """
        path = normalize(host_path)
        holding = [mount for mount in self.mounts if is_within(path, mount.host)]
        for mount in sorted(holding, key=lambda mount: -_depth(mount.host)):
            candidate = rebase(path, mount.host, mount.sandbox)
            if self.host_of(candidate) == path:
                return candidate
        return Outside(path, "no mount shows it" if not holding else "a deeper mount hides it in the sandbox")

    def absolute(self, path: str, cwd: str) -> str | Outside:
        """A request path made absolute against the sandbox cwd and normalised; the sandbox home is `Outside`."""
        if is_home(path):
            return Outside(path, "the sandbox home is not mapped")
        if not cwd.startswith("/"):
            raise ValueError(f"the sandbox cwd must be absolute, got {cwd!r}")
        return normalize(path if path.startswith("/") else cwd.rstrip("/") + "/" + path)

    def to_host(self, path: str, cwd: str) -> str | Outside:
        """The lexical host path of a request path (no disk check: see `resolve`)."""
        absolute = self.absolute(path, cwd)
        return absolute if isinstance(absolute, Outside) else self.host_of(absolute)


# --- the walk on the host disk ------------------------------------------------------------------------------------


class Kind(enum.Enum):
    """What the shell found at a host path (without following a final symlink)."""

    MISSING = "missing"  # nothing there
    DIR = "dir"  # a directory
    FILE = "file"  # a regular file
    OTHER = "other"  # a FIFO, socket or device


@dataclass(frozen=True, slots=True)
class Link:
    """A symlink and its target text."""

    target: str


Entry = Kind | Link
Look = Callable[[str], Entry]
"""The shell's lstat: what is at a host path. It may raise; the walk does not catch."""


class Reason(enum.Enum):
    """Why a walk refused a path."""

    OUTSIDE = "outside"  # no mount holds it, a symlink points out of every mount, or it names the sandbox home
    INVALID = "invalid_path"  # empty, or holds a NUL byte
    NOT_A_DIRECTORY = "not_a_directory"  # a component before the last is not a directory
    LOOP = "symlink_loop"  # more than MAX_LINKS symlinks


@dataclass(frozen=True, slots=True)
class Refused:
    """A path the walk refused: the reason, and a sentence naming what it found."""

    reason: Reason
    detail: str


@dataclass(frozen=True, slots=True)
class Resolved:
    """A checked path: its symlink-free sandbox path, its host path, and what was there when it was looked at."""

    sandbox: str
    host: str
    kind: Kind


def resolve(path_map: PathMap, path: str, cwd: str, look: Look) -> Resolved | Refused:
    """Check a request path against the host disk (see the module docstring); `cwd` is an absolute sandbox path.

    The mounts' host dirs are trusted as they are: the shell passes a map whose host dirs hold no symlink (their
    real paths), so a path below one is symlink-free when the walk found no symlink below the mount.
    """
    if path == "" or "\0" in path or "\0" in cwd:
        return Refused(Reason.INVALID, f"{path!r}: a path must be non-empty and hold no NUL byte")
    if is_home(path):
        return Refused(Reason.OUTSIDE, f"{path} names the sandbox home, which no mount holds")
    if not cwd.startswith("/"):
        raise ValueError(f"the sandbox cwd must be absolute, got {cwd!r}")
    # Not normalised: a `..` must apply to what the walk resolved, after any symlink before it.
    walked = _walk(path_map, split(path if path.startswith("/") else cwd + "/" + path), look, _Budget(path))
    if isinstance(walked, Refused):
        return walked
    final = "/" + "/".join(walked.names)
    host = path_map.host_of(final)
    if isinstance(host, Outside):
        return Refused(Reason.OUTSIDE, f"{final} is outside every mount")
    return Resolved(final, host, walked.kind)


_IDENTITY = PathMap((Mount("/", "/"),))


@dataclass(slots=True)
class _Budget:
    """The symlinks one request may still follow, shared by the walks of its link targets."""

    path: str
    links: int = 0


@dataclass(frozen=True, slots=True)
class _Walked:
    """A walk's end: symlink-free names, what is there, and how many trailing names do not exist."""

    names: list[str]
    kind: Kind
    missing: int


def _walk(path_map: PathMap, names: list[str], look: Look, budget: _Budget) -> _Walked | Refused:
    """Resolve names from the root in the map's space (a link target is resolved in host space: the identity)."""
    pending = list(reversed(names))  # a stack: the next name is last
    done: list[str] = []  # the resolved names so far: no symlink among them
    missing_from: int | None = None  # index in `done` of the first name that does not exist
    kind = Kind.DIR  # what is at "/" + "/".join(done)
    while pending:
        name = pending.pop()
        if name == "..":
            if missing_from is None and kind is not Kind.DIR:
                return Refused(Reason.NOT_A_DIRECTORY, f"{'/' + '/'.join(done)} is not a directory")
            if done:
                done.pop()
            if missing_from is not None and len(done) <= missing_from:
                missing_from = None
            kind = Kind.DIR if missing_from is None else Kind.MISSING
            continue
        if missing_from is not None:
            done.append(name)
            continue
        if kind is not Kind.DIR:
            return Refused(Reason.NOT_A_DIRECTORY, f"{'/' + '/'.join(done)} is not a directory")
        here = "/" + "/".join([*done, name])
        host = path_map.host_of(here)
        if isinstance(host, Outside):
            done.append(name)  # a directory above the mounts: the sandbox shows it, the host has nothing to check
            kind = Kind.DIR
            continue
        entry = look(host)
        if isinstance(entry, Link):
            budget.links += 1
            if budget.links > MAX_LINKS:
                return Refused(Reason.LOOP, f"more than {MAX_LINKS} symlinks resolving {budget.path}")
            if entry.target == "" or "\0" in entry.target:
                return Refused(Reason.INVALID, f"the symlink {here} has an empty target")
            # The host follows the link: its target is a host path (relative: to the link's host directory),
            # resolved on the host disk, then shown in the sandbox if a mount shows it.
            base = [] if entry.target.startswith("/") else split(host)[:-1]
            followed = _walk(_IDENTITY, base + split(entry.target), look, budget)
            if isinstance(followed, Refused):
                return followed
            back = path_map.sandbox_of("/" + "/".join(followed.names))
            if isinstance(back, Outside):
                return Refused(Reason.OUTSIDE, f"the symlink {here} points to {entry.target}, outside every mount")
            done = split(back)
            kind = followed.kind
            missing_from = len(done) - min(followed.missing, len(done)) if followed.missing else None
            continue
        done.append(name)
        kind = entry
        if entry is Kind.MISSING:
            missing_from = len(done) - 1
    missing = 0 if missing_from is None else len(done) - missing_from
    return _Walked(done, Kind.MISSING if missing else kind, missing)
