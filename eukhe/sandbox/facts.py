"""What the shell reads off the disk for one confined launch or file check: the policy's paths, real and existing
(`eukhe.core.sandbox.Facts`); the decisions are the core's."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from eukhe.beneath import read_regular
from eukhe.core import sandbox as core
from eukhe.core.pathmap import is_within, normalize

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
    private_caches: str | None = None,
) -> core.Facts:
    """The facts of one launch: `hidden` are eukhe's own directories (denied whatever the policy says), `readable`
    what a session needs of them (its kernel venv, its artifacts), `own` what a launch writes of them in every
    confined mode (the kernel's snapshot directory); `sockets` the bound socket paths (None: read them off /proc);
    `private_caches` the session's directory of private caches when bwrap cannot overlay (None: it can)."""
    home = home if home is not None else os.path.expanduser("~")
    cwd_real = os.path.realpath(cwd)
    tmp_real = os.path.realpath(tmp)
    roots = [real(expand(path, home)) for path in writable_roots]
    writable = tuple(dict.fromkeys(p for p in roots if p is not None and p not in (cwd_real, tmp_real)))
    caches = tuple(
        core.Cache(path, None if private_caches is None else os.path.join(private_caches, private_name(name)))
        for name in core.CACHE_DIRS
        if (path := real(os.path.join(home, name))) is not None and path not in writable
    )
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
    protected = [(path, _kind(path) is True) for path in core.protected_paths(open_roots, present)]
    git = core.git_mounts(*find_git(open_roots))
    shown = tuple(p for p in (real(path) for path in readable) if p is not None)
    bound = [found for path in (unix_sockets() if sockets is None else sockets) if (found := real(path)) is not None]
    home_real = real(home)
    sockets_found = [path for path in dict.fromkeys(bound) if _is_socket(path)]
    masked = core.sockets_to_mask(sockets_found, open_roots, list(denied), home_real)
    return core.Facts(
        mode=mode,
        network=network,
        cwd=cwd_real,
        tmp=tmp_real,
        writable=writable,
        denied=tuple(denied.items()),
        readable=shown,
        protected=tuple(dict.fromkeys((*protected, *git.protected))),
        sockets=tuple(masked),
        own=tuple(dict.fromkeys(p for p in (real(path) for path in own) if p is not None)),
        caches=caches,
        pinned=git.pinned,
        home=home_real,
    )


def prepare(roots: Sequence[str]) -> None:
    """Make what a launch protects but cannot find: the protected directories missing below each writable root
    (`.eukhe`, `.agents`, `.claude`, empty, with the umask's mode as any of the user's directories) and a `hooks`
    directory in each git directory without one, so that no job can create them. A root that cannot be written is
    left as it is (nothing confined can write there either)."""
    roots = [os.path.realpath(root) for root in roots]
    present = frozenset(
        path for root in roots for name in core.PROTECTED_DIRS if os.path.lexists(path := normalize(root + "/" + name))
    )
    _, found = find_git(roots)
    wanted = [*core.dirs_to_make(roots, present), *core.git_mounts((), found).to_make]
    for path in wanted:
        with contextlib.suppress(OSError):
            os.mkdir(path)


def make_home_cache(home: str | None = None) -> None:
    """Make the home's cache (`core.HOME_CACHE`, mode 0700) where nothing of that name is there. A home that is
    missing or cannot be written is left as it is (the cache is then not writable, as before)."""
    home = home if home is not None else os.path.expanduser("~")
    if os.path.isdir(home):
        with contextlib.suppress(OSError):
            os.mkdir(os.path.join(home, core.HOME_CACHE), 0o700)


def private_name(cache: str) -> str:
    """The name of a cache's private directory in a session (`.cargo/registry` is `.cargo_registry`)."""
    return cache.replace("/", "_")


GIT_POINTER_CAP = 4096
"""The largest `.git` file, `commondir` or `gitdir` pointer read: each holds one path."""
MODULES_DEPTH = 8
"""How deep `<git dir>/modules` is searched for submodules' git directories (a name may hold slashes)."""


def find_git(roots: Sequence[str]) -> tuple[list[str], list[core.GitDirFound]]:
    """The git layout below the writable `roots` that a confined launch protects: each `.git` that is a file (a
    pointer), and each git directory inside a root (the repository's, the one its `commondir` names, its
    submodules' under `modules/`) with its protected names present and its linked worktrees."""
    gitfiles: list[str] = []
    queue: list[str] = []
    for root in roots:
        dotgit = os.path.join(root, ".git")
        kind = _lkind(dotgit)
        if kind == "file":
            gitfiles.append(dotgit)
            queue += _pointed(dotgit, root, prefix="gitdir:")
        elif kind in ("dir", "link"):
            queue.append(os.path.realpath(dotgit))
    found: list[core.GitDirFound] = []
    seen: set[str] = set()
    while queue:
        gitdir = queue.pop(0)
        if gitdir in seen or not any(_within(gitdir, root) for root in roots) or _lkind(gitdir) != "dir":
            continue
        seen.add(gitdir)
        present = frozenset(name for name in core.GITDIR_PROTECTED if os.path.lexists(os.path.join(gitdir, name)))
        worktrees = []
        for worktree in _subdirs(os.path.join(gitdir, "worktrees")):
            names = frozenset(name for name in core.WORKTREE_PROTECTED if os.path.lexists(os.path.join(worktree, name)))
            worktrees.append((worktree, names))
            for pointer in _pointed(os.path.join(worktree, "gitdir"), worktree):
                if any(_within(pointer, root) for root in roots) and _lkind(pointer) == "file":
                    gitfiles.append(pointer)  # the linked checkout's own `.git` file
        found.append(core.GitDirFound(gitdir, present, tuple(worktrees)))
        if "commondir" in present:
            queue += _pointed(os.path.join(gitdir, "commondir"), gitdir)
        queue += _module_gitdirs(os.path.join(gitdir, "modules"), MODULES_DEPTH)
    return gitfiles, found


def _within(path: str, root: str) -> bool:
    """Whether a real path is `root` or below it."""
    return is_within(normalize(path), root)


def _lkind(path: str) -> str | None:
    """ "dir", "file", "link" or "other" for what is at `path` (a link not followed), None when nothing is."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def _pointed(pointer: str, base: str, *, prefix: str = "") -> list[str]:
    """The real path a git pointer file names (`gitdir: PATH` in a `.git` file; a bare path in `commondir` and
    `gitdir`), relative to `base`; none when it cannot be read."""
    try:
        text = read_regular(pointer, GIT_POINTER_CAP).decode("utf-8", "surrogateescape").strip()
    except OSError:
        return []
    if prefix:
        if not text.startswith(prefix):
            return []
        text = text[len(prefix) :].strip()
    if not text or "\0" in text:
        return []
    return [os.path.realpath(os.path.join(base, text))]


def _subdirs(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entry.path for entry in entries if entry.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _module_gitdirs(directory: str, depth: int) -> list[str]:
    """The git directories under `<git dir>/modules`: a directory holding `HEAD` is one (its own `modules/` is
    searched when it is queued); any other is searched below, `depth` levels at most."""
    found = []
    for sub in _subdirs(directory):
        if os.path.lexists(os.path.join(sub, "HEAD")):
            found.append(sub)
        elif depth > 1:
            found += _module_gitdirs(sub, depth - 1)
    return found


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
