"""Where the file tools run, and how a request path becomes a checked host path (spec S3 items 3-5).

`FsContext` is one session's setting: its host working directory, its `Truncation` and artifact dir, and for a
wrapped kernel its `PathMap` and the kernel's sandbox cwd. `Locator` checks paths on the host disk through
`eukhe.core.pathmap.resolve`, with `os.lstat`/`os.readlink` as its eyes.

The `outside` rule and the Local transport. Under Local (no path map) the kernel runs as the session's own user on
the host, so every host path is allowed: the map is the identity and no path is `outside`; `~` and `~/x` are the
user's home there. A wrapped kernel's paths are sandbox paths: they must resolve, on the host disk and with every
symlink followed, inside a mount's host directory (its real path); anything else, and the sandbox home, is
`outside`. Replies carry the checked sandbox path (the host path under Local), never an unchecked one.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from eukhe.core import pathmap
from eukhe.core import sandbox as policy
from eukhe.core.bound import DEFAULT_TRUNCATION, Keep, On, Truncation
from eukhe.fs.errors import FsError, Reason, os_error
from eukhe.output import BoundedOutput, BoundedResult
from eukhe.records.output import OutputWindow

_REFUSALS = {
    pathmap.Reason.OUTSIDE: Reason.OUTSIDE,
    pathmap.Reason.INVALID: Reason.INVALID_PATH,
    pathmap.Reason.NOT_A_DIRECTORY: Reason.NOT_A_DIRECTORY,
    pathmap.Reason.LOOP: Reason.SYMLINK_LOOP,
}


@dataclass(frozen=True, slots=True)
class FsContext:
    """One session's setting for the file tools.

    `cwd`: the session's host working directory. `truncation` and `artifact_dir`: the session's output bound and
    where a full output goes when an answer is cut. `path_map`: a wrapped kernel's mounts (None: the Local
    transport). `sandbox_cwd`: the kernel's current directory, absolute, as the kernel sees it (a sandbox path; a
    host path under Local), which relative paths start from (None: `cwd`'s sandbox path).
    """

    cwd: str | os.PathLike[str]
    truncation: Truncation = DEFAULT_TRUNCATION
    artifact_dir: Path | None = None
    path_map: pathmap.PathMap | None = None
    sandbox_cwd: str | None = None
    sandbox: policy.Facts | None = None
    """The session's sandbox, read off the disk for this request (None: no policy, the user's full rights)."""

    def hidden_below(self, host_dir: str) -> tuple[str, ...]:
        """The denied paths below a host directory a search walks (its results there are left out)."""
        if self.sandbox is None:
            return ()
        return tuple(path for path, _ in self.sandbox.denied if pathmap.is_within(path, host_dir) and path != host_dir)

    def bounded(self, prefix: str) -> BoundedOutput:
        """A bounded output for one answer: the session's limits, keeping the head (a listing or a file reads from
        its start; `offset` pages on)."""
        truncation = self.truncation
        if isinstance(truncation, On):
            truncation = On(replace(truncation.limits, keep=Keep.HEAD))
        return BoundedOutput(truncation, self.artifact_dir, artifact_prefix=prefix)


@dataclass(frozen=True, slots=True)
class Place:
    """A checked path: `host` to open, `shown` as the caller sees it, what was there, and the argument as given."""

    host: str
    shown: str
    kind: pathmap.Kind
    asked: str


def look(host: str) -> pathmap.Entry:
    """What is at a host path, without following a final symlink (the walk's eyes). OS errors other than a missing
    path propagate; `Locator` names them with the caller's path."""
    try:
        info = os.lstat(host)
    except (FileNotFoundError, NotADirectoryError):
        return pathmap.Kind.MISSING
    if stat.S_ISLNK(info.st_mode):
        return pathmap.Link(os.readlink(host))
    if stat.S_ISDIR(info.st_mode):
        return pathmap.Kind.DIR
    if stat.S_ISREG(info.st_mode):
        return pathmap.Kind.FILE
    return pathmap.Kind.OTHER


def _real_map(path_map: pathmap.PathMap) -> pathmap.PathMap:
    """The map with each mount's host dir replaced by its real path, so the walk can trust it symlink-free."""
    return pathmap.PathMap(tuple(pathmap.Mount(m.sandbox, os.path.realpath(m.host)) for m in path_map.mounts))


class Locator:
    """Checks the paths of one request: the map and the cwd are checked once, then each path against them."""

    def __init__(self, context: FsContext) -> None:
        self.local = context.path_map is None
        self.sandbox = context.sandbox
        self.map = pathmap.PathMap.identity() if context.path_map is None else _real_map(context.path_map)
        host_cwd = os.path.abspath(os.fspath(context.cwd))
        if context.sandbox_cwd is not None:
            asked = context.sandbox_cwd
            if not asked.startswith("/"):
                raise FsError(Reason.BAD_REQUEST, asked, f"the sandbox cwd must be an absolute path, got {asked}")
        else:
            back = self.map.sandbox_of(os.path.realpath(host_cwd))
            if isinstance(back, pathmap.Outside):
                raise FsError(Reason.OUTSIDE, host_cwd, f"the working directory {host_cwd} is outside every mount")
            asked = back
        cwd = self._resolve(asked, "/", "resolve the working directory")
        if cwd.kind is pathmap.Kind.MISSING:
            raise FsError(Reason.NOT_FOUND, asked, f"the working directory {asked} is gone")
        if cwd.kind is not pathmap.Kind.DIR:
            raise FsError(Reason.NOT_A_DIRECTORY, asked, f"the working directory {asked} is not a directory")
        self.cwd = cwd.shown

    def _resolve(self, asked: str, cwd: str, doing: str) -> Place:
        path = os.path.expanduser(asked) if self.local and pathmap.is_home(asked) else asked
        try:
            walked = pathmap.resolve(self.map, path, cwd, look)
        except OSError as error:
            raise os_error(error, asked, doing) from error
        except ValueError as error:  # a lone surrogate the file system encoding cannot carry
            raise FsError(Reason.INVALID_PATH, asked, f"cannot {doing} {asked!r}: {error}") from error
        if isinstance(walked, pathmap.Refused):
            raise FsError(_REFUSALS[walked.reason], asked, walked.detail)
        return Place(walked.host, walked.sandbox, walked.kind, asked)

    def place(self, path: str, doing: str = "resolve") -> Place:
        """The checked place of a request path (relative paths against the cwd), or an `FsError`; the sandbox
        policy is checked on the resolved host path (`reason: sandbox`, naming the path and the rule)."""
        if not isinstance(path, str):
            raise FsError(Reason.BAD_REQUEST, None, f"a path must be a string, got {type(path).__name__}")
        place = self._resolve(path, self.cwd, doing)
        if self.sandbox is not None:
            want = policy.Want.WRITE if doing in WRITING else policy.Want.READ
            verdict = policy.access(self.sandbox, place.host, want)
            if isinstance(verdict, policy.Denied):
                raise FsError(Reason.SANDBOX, path, verdict.message(place.shown, want))
        return place


WRITING = frozenset({"write", "edit"})
"""What `place` is asked for that changes the file (the rest only read)."""


class BoundedFields(TypedDict):
    """The bounded output of an answer (`eukhe.records.fs.Bounded`)."""

    output: OutputWindow


def bounded_fields(result: BoundedResult) -> BoundedFields:
    """The bounded output of an answer."""
    return {"output": result.to_record()}


def sibling(host: str, tag: str) -> str:
    """A fixed name beside `host` for its temporary copy (`.NAME.TAG`, hashed when that would be too long)."""
    directory, name = os.path.split(host)
    candidate = f".{name}.{tag}"
    if len(os.fsencode(candidate)) > 255:
        candidate = f".eukhe-{hashlib.sha256(os.fsencode(name)).hexdigest()[:20]}.{tag}"
    return os.path.join(directory, candidate)
