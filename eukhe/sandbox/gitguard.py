"""Undo the git state a confined job may not leave behind (the rules: `eukhe.core.gitguard`).

`GitGuard` belongs to one session's sandbox. It watches the session's git directories with inotify on the loop:
a `commondir` made in a repository's own git directory is removed as soon as it appears, and a change of an index
or of a watched config starts an audit. An audit (also run before each confined launch and after each confined
answer) lists the repository's gitlinks (`git ls-files -s`), reads the config of each nested repository one points
to, and removes every entry that would make the user's `git status` in the outer repository run a program there.
A repository a job made at a writable root that had none when a launch started (`git init`) is audited the same
way, and its hooks other than git's samples are removed. What it undid is kept as notices, which the next answer
carries.

git runs here on the host, on a repository a job could write: with no system or global config, and with its
fsmonitor and hooks off, so that it reads the repository's own config only (which the sandbox keeps read-only).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import struct
import subprocess
from collections.abc import Sequence

from eukhe.beneath import read_regular
from eukhe.core import gitguard as core

IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_Q_OVERFLOW = 0x4000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
WATCHED = IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW
"""What a watch hears in a git directory (<linux/inotify.h>): a name made, moved in, or written."""
EVENT = struct.Struct("iIII")
GIT_TIMEOUT_S = 30.0
"""A git command on the host that takes longer is stopped (a hostile repository may be made huge)."""
CONFIG_CAP = 1 << 20
"""The largest nested config read; a larger one is left out of the audit with a notice."""
HARDENED = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


def git_environment() -> dict[str, str]:
    """The environment git runs in here: no system or global config, no prompts, no pager."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat")
    return env


def run_git(args: Sequence[str], cwd: str | None = None) -> subprocess.CompletedProcess[bytes] | None:
    """git with `args`, hardened; None when git is not here or did not answer in time."""
    binary = shutil.which("git")
    if binary is None:
        return None
    try:
        return subprocess.run(
            [binary, *HARDENED, *args],
            cwd=cwd,
            env=git_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def gitdir_of(worktree: str) -> str | None:
    """The git directory git uses for a work tree: its `.git` directory (through a symlink, as git follows one), or
    where a `.git` file's `gitdir:` line points; None when there is none."""
    dotgit = os.path.join(worktree, ".git")
    if os.path.isdir(dotgit):
        return os.path.realpath(dotgit)
    if os.path.isfile(dotgit) and not os.path.islink(dotgit):
        with contextlib.suppress(OSError):
            text = read_regular(dotgit, 4096).decode("utf-8", "replace").strip()
            if text.startswith("gitdir:"):
                return os.path.realpath(os.path.join(worktree, text[len("gitdir:") :].strip()))
    return None


class Inotify:
    """An inotify descriptor (through libc: the standard library has none)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self.fd: int = fd

    def add(self, path: str) -> int:
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), WATCHED)
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return int(wd)

    def events(self) -> list[tuple[int, int, str]]:
        """The events read so far: (watch, mask, name)."""
        found: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except (BlockingIOError, InterruptedError):
                return found
            if not data:
                return found
            offset = 0
            while offset + EVENT.size <= len(data):
                wd, mask, _, length = EVENT.unpack_from(data, offset)
                raw = data[offset + EVENT.size : offset + EVENT.size + length].rstrip(b"\0")
                found.append((wd, mask, os.fsdecode(raw)))
                offset += EVENT.size + length

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


class GitGuard:
    """One session's watch and audit of the git directories below its writable roots."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self._roots: list[str] = []
        self._gitdirs: dict[int, str] = {}  # a repository's own git directories, by watch
        self._nested: dict[int, str] = {}  # nested repositories' git directories, by watch
        self._inotify: Inotify | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._audit_pending = False
        self._baseline: dict[str, frozenset[tuple[str, str]]] | None = None  # nested configs before any launch
        self._bare_roots: set[str] = set()  # writable roots that had no .git when a launch started
        self._made: set[str] = set()  # the git directories of repositories a job made at one of those roots

    def watch(self, roots: Sequence[str], gitdirs: Sequence[str]) -> None:
        """Watch the repositories' own git directories found for a launch (`gitdirs`, none holding a `commondir`),
        and remember the roots the audits look under. Sweeps first: what was made before the watch is undone."""
        self._roots = list(dict.fromkeys([*self._roots, *roots]))
        self._find_made()  # a .git that appeared since a launch that saw none is a job's, before it is looked at again
        self._bare_roots.update(root for root in roots if not os.path.lexists(os.path.join(root, ".git")))
        if self._baseline is None:  # the user's own nested repositories, as they were before any confined launch
            self._baseline = {
                gitdir: frozenset(self._entries(gitdir)) for root in roots for gitdir in self._nested_gitdirs(root)
            }
        for gitdir in gitdirs:
            self._undo_commondir(gitdir)
        with contextlib.suppress(RuntimeError):
            self._start(asyncio.get_running_loop())
        if self._inotify is None:
            return
        known = set(self._gitdirs.values())
        for gitdir in gitdirs:
            if gitdir not in known:
                with contextlib.suppress(OSError):
                    self._gitdirs[self._inotify.add(gitdir)] = gitdir

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._inotify is not None:
            return
        try:
            self._inotify = Inotify()
        except OSError:
            return  # no inotify here (or out of instances): the audits around each launch still run
        self._loop = loop
        loop.add_reader(self._inotify.fd, self._readable)

    def _readable(self) -> None:
        assert self._inotify is not None
        for wd, mask, name in self._inotify.events():
            gitdir = self._gitdirs.get(wd)
            if mask & IN_Q_OVERFLOW:
                for known in list(self._gitdirs.values()):
                    self._undo_commondir(known)
                self._schedule_audit()
            elif gitdir is not None and name == core.UNEXPECTED_IN_GITDIR:
                self._undo_commondir(gitdir)
            elif name in ("index", "config"):
                self._schedule_audit()

    def _schedule_audit(self) -> None:
        if self._audit_pending or self._loop is None:
            return
        self._audit_pending = True
        self._loop.call_soon(self._audit_from_loop)

    def _audit_from_loop(self) -> None:
        self._audit_pending = False
        self.audit()

    def _undo_commondir(self, gitdir: str) -> None:
        """Remove a `commondir` from a repository's own git directory (it would send git to another config)."""
        path = os.path.join(gitdir, core.UNEXPECTED_IN_GITDIR)
        try:
            said = read_regular(path, 4096).decode("utf-8", "replace").strip()
        except OSError:
            said = "?"
        self._remove(path, f"it sent git to {said!r} for its config and hooks")

    def audit(self) -> None:
        """Check every gitlinked nested repository below the roots, and every repository a job made at a root; undo
        what `core.runs_code` refuses, and a made repository's hooks."""
        self._find_made()
        for gitdir in sorted(self._made):
            self._undo_commondir(gitdir)
            self._audit_config(gitdir)
            self._undo_hooks(gitdir)
            self._watch_config(gitdir)
        for root in self._roots:
            for gitdir in self._nested_gitdirs(root):
                self._audit_config(gitdir)
                self._watch_config(gitdir)

    def _watch_config(self, gitdir: str) -> None:
        """Audit again when this git directory's config changes."""
        if self._inotify is not None and gitdir not in self._nested.values():
            with contextlib.suppress(OSError):
                self._nested[self._inotify.add(gitdir)] = gitdir

    def _find_made(self) -> None:
        """Take the repositories made at a root that had no `.git` when a launch started as a job's."""
        for root in sorted(self._bare_roots):
            if os.path.lexists(os.path.join(root, ".git")):
                self._bare_roots.discard(root)
                gitdir = gitdir_of(root)
                if gitdir is not None:
                    self._made.add(gitdir)

    def _undo_hooks(self, gitdir: str) -> None:
        """Remove every hook git would run from a repository a job made (git's samples stay): the user's next
        commit there would run it."""
        hooks = os.path.join(gitdir, "hooks")
        if os.path.islink(hooks):
            self._remove(hooks, "a hooks directory elsewhere, which git would run hooks from")
            return
        try:
            names = sorted(entry.name for entry in os.scandir(hooks) if not entry.is_dir(follow_symlinks=False))
        except OSError:
            return
        for name in names:
            if core.hook_runs(name):
                self._remove(os.path.join(hooks, name), "a hook, which the user's next git command there would run")

    def _remove(self, path: str, what: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as error:
            self.notices.append(f"eukhe could not remove {path} ({error.strerror}): remove it before you run git")
            return
        self.notices.append(f"eukhe removed {path}, which a confined command made: {what}")

    def _nested_gitdirs(self, root: str) -> list[str]:
        """The git directories of the nested repositories the repository at `root` links (gitlinks in its index)."""
        if not os.path.isdir(os.path.join(root, ".git")) and not os.path.isfile(os.path.join(root, ".git")):
            return []
        listed = run_git(["ls-files", "-s", "-z"], cwd=root)
        if listed is None or listed.returncode != 0:
            return []
        found = []
        for entry in listed.stdout.split(b"\0"):
            if not entry.startswith(b"160000 "):
                continue
            gitdir = gitdir_of(os.path.join(root, os.fsdecode(entry.split(b"\t", 1)[-1])))
            if gitdir is not None:
                found.append(gitdir)
        return found

    def _entries(self, gitdir: str) -> list[tuple[str, str]]:
        """The (key, value) entries of a git directory's config, as git reads them (none when it cannot)."""
        listed = run_git(["config", "--file", os.path.join(gitdir, "config"), "--list", "-z"])
        if listed is None or listed.returncode != 0:
            return []
        entries = []
        for entry in listed.stdout.split(b"\0"):
            key, _, value = os.fsdecode(entry).partition("\n")
            if key:
                entries.append((key, value))
        return entries

    def _audit_config(self, gitdir: str) -> None:
        """Undo what a job added to a nested or job-made repository's config that would run code (the user's own
        entries, there before any confined launch, stay)."""
        config = os.path.join(gitdir, "config")
        try:
            read_regular(config, CONFIG_CAP)
        except FileNotFoundError:
            return
        except OSError as error:
            self.notices.append(
                f"eukhe could not check {config} ({error.strerror}): a confined command could write it, and it may "
                "run code on your next git command; look at it before you run git"
            )
            return
        before = (self._baseline or {}).get(gitdir, frozenset())
        refused: dict[str, str] = {}
        for key, value in self._entries(gitdir):
            why = core.runs_code(key, value)
            if why is not None and (key, value) not in before:
                refused.setdefault(key, why)
        for key, why in refused.items():
            undone = run_git(["config", "--file", config, "--unset-all", key])
            if undone is not None and undone.returncode == 0:
                self.notices.append(f"eukhe removed {key} from {config}, which a confined command wrote ({why})")
            else:
                self.notices.append(f"eukhe could not remove {key} from {config} ({why}): remove it before git")

    def take_notices(self) -> list[str]:
        """The notices since the last call (each said once)."""
        taken, self.notices = self.notices, []
        return taken

    def close(self) -> None:
        if self._inotify is not None:
            if self._loop is not None and not self._loop.is_closed():
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(self._inotify.fd)
            self._inotify.close()
            self._inotify = None
