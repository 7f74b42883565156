"""What the shell reads off the disk for one confined launch or file check: the policy's paths, real and existing
(`eukhe.core.sandbox.Facts`); the decisions are the core's."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from eukhe.core import sandbox as core
from eukhe.core.pathmap import normalize

UNIX_SOCKETS = "/proc/net/unix"


def expand(path: str, home: str) -> str:
    """A policy path as an absolute, lexically normal one (`~` is `home`; a relative one is refused as unusable)."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    if not path.startswith("/"):
        raise ValueError(f"a sandbox path must be absolute or start with ~/, got {path!r}")
    return normalize(path)


def real(path: str) -> str | None:
    """The real path of an existing `path`, else None."""
    try:
        os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path)


def _kind(path: str) -> bool | None:
    """True for a directory, False for anything else that exists, None when nothing is there."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return None


def unix_sockets(path: str = UNIX_SOCKETS) -> list[str]:
    """The paths of the Unix sockets bound on this machine's network namespace (abstract ones have no path)."""
    try:
        with open(path, "rb") as table:
            lines = table.read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith(b"/"):
            found.append(os.fsdecode(fields[7]))
    return found


def gather(
    mode: core.Mode,
    network: core.Network,
    *,
    cwd: str,
    tmp: str,
    writable_roots: Sequence[str],
    deny_read: Sequence[str],
    hidden: Iterable[str],
    readable: Iterable[str],
    home: str | None = None,
    sockets: Iterable[str] | None = None,
    own: Iterable[str] = (),
) -> core.Facts:
    """The facts of one launch: `hidden` are eukhe's own directories (denied whatever the policy says), `readable`
    what a session needs of them (its kernel venv, its artifacts), `own` what a launch writes of them in every
    confined mode (the kernel's snapshot directory); `sockets` the bound socket paths (None: read them off /proc)."""
    home = home if home is not None else os.path.expanduser("~")
    cwd_real = os.path.realpath(cwd)
    tmp_real = os.path.realpath(tmp)
    roots = [real(expand(path, home)) for path in writable_roots]
    caches = [real(os.path.join(home, name)) for name in core.CACHE_DIRS]
    writable = tuple(dict.fromkeys(p for p in (*roots, *caches) if p is not None and p not in (cwd_real, tmp_real)))
    denied: dict[str, bool] = {}
    for path in (*(expand(p, home) for p in deny_read), *hidden):
        found = real(path)
        kind = None if found is None else _kind(found)
        if found is not None and kind is not None:
            denied.setdefault(found, kind)
    open_roots = () if mode is not core.Mode.WORKSPACE_WRITE else (cwd_real, *writable)
    present = frozenset(
        candidate
        for root in open_roots
        for names in core.PROTECTED_NAMES
        if os.path.lexists(candidate := normalize(root + "/" + "/".join(names)))
    )
    protected = tuple((path, _kind(path) is True) for path in core.protected_paths(open_roots, present))
    shown = tuple(p for p in (real(path) for path in readable) if p is not None)
    bound = [found for path in (unix_sockets() if sockets is None else sockets) if (found := real(path)) is not None]
    masked = core.sockets_to_mask([path for path in dict.fromkeys(bound) if _is_socket(path)], open_roots, list(denied))
    return core.Facts(
        mode=mode,
        network=network,
        cwd=cwd_real,
        tmp=tmp_real,
        writable=writable,
        denied=tuple(denied.items()),
        readable=shown,
        protected=protected,
        sockets=tuple(masked),
        own=tuple(dict.fromkeys(p for p in (real(path) for path in own) if p is not None)),
    )


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def eukhe_dirs() -> list[str]:
    """eukhe's own directories, which no confined process sees: the agent dir, the sessions and workspaces roots,
    and the daemon's socket directory."""
    from eukhe import paths  # noqa: PLC0415 - the shell's own paths, read at each launch (tests move them)

    base = os.environ.get("TMPDIR") or "/tmp"
    socket_dir = os.path.join(base, f"eukhe-{os.getuid()}")
    return [str(paths.agent_dir()), str(paths.sessions_root()), str(paths.workspaces_root()), socket_dir]


def make_private_dirs(path: Path) -> None:
    """`path` and its missing parents, each 0700 whatever the umask."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700)
        os.chmod(directory, 0o700)


def ensure_dir(path: Path) -> Path:
    """A private directory (0700) that exists: the session's /tmp."""
    make_private_dirs(path)
    return path
