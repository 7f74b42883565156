"""Undo the git state a confined job may not leave behind (the rules: `eukhe.core.gitguard`).

`GitGuard` belongs to one session's sandbox. At the session's first confined launch it reads the config files of
the git directories below the writable roots (each repository's `config` and `config.worktree`, each linked
worktree's `config.worktree`, and those of the nested repositories the index links): the baseline, kept in the
session's directory, so that a reopened session keeps it. It watches those git directories with inotify on the
loop: a `commondir` made in a repository's own git directory is removed as soon as it appears, and a change of an
index or a config starts an audit. An audit (also run before each confined launch and after each confined answer)
reads each of those config files as git does and unsets every entry that would run code and was not in the
baseline (`core.undo_plan`); a repository a job made at a writable root that had none when a launch started
(`git init`) is audited the same way, with an empty baseline, and its hooks other than git's samples are removed.
What it undid is kept as notices, which the next answer carries.

A config is read once, from a descriptor of its git directory opened following no symlink, and what is decided is
about those bytes: the fix is made by git on a private copy and renamed over the config in that same directory, so
a job's link cannot send the write elsewhere. A config that is a link, not a file, too large or not git's syntax
is put back as it was before the session (`core.put_back`); one that is a hard link is replaced by a copy (a write
through its other name would not reach the watch).

git runs here on the host, on files a job could write: with no system or global config, and with its fsmonitor
and hooks off, so that it reads only what it is given.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import stat
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from eukhe.beneath import open_dir, read_regular
from eukhe.core import gitguard as core
from eukhe.core.sandbox import GitDirFound
from eukhe.private_fs import create_private_file

IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_Q_OVERFLOW = 0x4000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
WATCHED = IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW
"""What a watch hears in a git directory (<linux/inotify.h>): a name made, moved in, written or closed after a
write."""
TRIGGERS = frozenset({"index", "config", "config.worktree"})
"""The names in a watched directory whose change starts an audit."""
EVENT = struct.Struct("iIII")
GIT_TIMEOUT_S = 30.0
"""A git command on the host that takes longer is stopped (a hostile repository may be made huge)."""
CONFIG_CAP = 1 << 20
"""The largest config the audit reads; a larger one is put back as it was before the session."""
CONFIG_FILES = ("config", "config.worktree")
"""The config files git reads in a git directory (the second only with `extensions.worktreeConfig`)."""
WORKTREE_CONFIG = "config.worktree"
"""The config file git reads in a linked worktree's directory (`<git dir>/worktrees/NAME`)."""
HARDENED = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


def git_environment() -> dict[str, str]:
    """The environment git runs in here: no system or global config, no prompts, no pager."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat")
    return env


def run_git(
    args: Sequence[str], cwd: str | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes] | None:
    """git with `args` (and `stdin`), hardened; None when git is not here or did not answer in time."""
    binary = shutil.which("git")
    if binary is None:
        return None
    try:
        return subprocess.run(
            [binary, *HARDENED, *args],
            cwd=cwd,
            env=git_environment(),
            input=stdin if stdin is not None else b"",
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


def parse_config(raw: bytes) -> list[core.Entry] | None:
    """The entries of a config file's bytes as git reads them (its includes not followed: an include is an entry
    itself); None when git cannot read them."""
    listed = run_git(["config", "--file", "-", "--list", "-z"], cwd="/", stdin=raw)
    if listed is None or listed.returncode != 0:
        return None
    entries: list[core.Entry] = []
    for entry in listed.stdout.split(b"\0"):
        key, newline, value = os.fsdecode(entry).partition("\n")
        if key:
            entries.append((key, value if newline else None))
    return entries


def config_files(gitdir: str) -> list[str]:
    """The config files git may read in a git directory and its linked worktrees' directories, there or not."""
    found = [os.path.join(gitdir, name) for name in CONFIG_FILES]
    with contextlib.suppress(OSError), os.scandir(os.path.join(gitdir, "worktrees")) as entries:
        found += sorted(os.path.join(e.path, WORKTREE_CONFIG) for e in entries if e.is_dir(follow_symlinks=False))
    return found


def signature(info: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file is written, renamed over, linked or replaced (its change time included)."""
    return (info.st_dev, info.st_ino, info.st_mode, info.st_nlink, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class UnreadableConfigError(Exception):
    """A config the audit cannot read as git does: a link, not a regular file, too large, or not git's syntax."""


def read_config(dir_fd: int, name: str) -> tuple[bytes, list[core.Entry]]:
    """A config's bytes and entries, read from its directory following no link (`UnreadableConfigError` when it
    cannot be)."""
    try:
        raw = read_regular(name, CONFIG_CAP, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise UnreadableConfigError(error.strerror or str(error)) from error
    entries = parse_config(raw)
    if entries is None:
        raise UnreadableConfigError("git cannot read it")
    return raw, entries


def take_before(gitdirs: Sequence[str]) -> dict[str, core.Before]:
    """The config files of these git directories as they are now (those not there are left out: absent)."""
    found: dict[str, core.Before] = {}
    for gitdir in gitdirs:
        for path in config_files(gitdir):
            directory, name = os.path.split(path)
            try:
                dir_fd = open_dir(directory)
            except OSError:
                continue
            try:
                raw, entries = read_config(dir_fd, name)
                found[path] = core.Before(core.Was.READ, frozenset(entries), raw)
            except FileNotFoundError:
                continue
            except UnreadableConfigError:
                found[path] = core.Before(core.Was.UNREADABLE)
            finally:
                os.close(dir_fd)
    return found


def fixed_config(raw: bytes, plan: Sequence[core.Undo]) -> bytes | None:
    """A config's bytes with each key of `plan` unset and the values it keeps put back (a key with no value as
    `true`, which git reads alike), made by git on a private copy; None when git could not."""
    with tempfile.TemporaryDirectory(prefix="eukhe-gitguard-") as private:
        copy = os.path.join(private, "config")
        Path(copy).write_bytes(raw)
        for undo in plan:
            done = run_git(["config", "--file", copy, "--unset-all", undo.key], cwd="/")
            if done is None or done.returncode not in (0, 5):  # 5: no such key left
                return None
            for value in undo.keep:
                again = run_git(["config", "--file", copy, "--add", undo.key, "true" if value is None else value])
                if again is None or again.returncode != 0:
                    return None
        return Path(copy).read_bytes()


class RacedError(Exception):
    """The config changed between the audit's read and its fix: it is read again."""


def install(dir_fd: int, name: str, data: bytes, mode: int, expected: tuple[int, ...] | None) -> os.stat_result:
    """Put `data` at `name` in the directory and answer the new file's status. It is written to `NAME.lock`, taken
    as git takes it (so no git writes the config meanwhile), or, when that is there already (a git writing, or a
    lock a job left), to a new file of a random name; then renamed over whatever `name` is (a link is replaced,
    never followed), if `name` still has the status `expected` (None: whatever it has), else `RacedError`."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    staged = f"{name}.lock"
    try:
        fd = os.open(staged, flags, mode, dir_fd=dir_fd)
    except FileExistsError:
        staged = f".{name}.eukhe-{secrets.token_hex(8)}"
        fd = os.open(staged, flags, mode, dir_fd=dir_fd)
    try:
        try:
            with os.fdopen(fd, "wb", closefd=False) as out:
                out.write(data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        if expected is not None and signature(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) != expected:
            raise RacedError(name)
        os.rename(staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged, dir_fd=dir_fd)
        raise
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


ATTEMPTS = 5
"""How often one audit reads a config again that changed while it was being fixed (a job writing at that moment);
a later change starts another audit anyway."""


def load_before(path: Path) -> dict[str, core.Before] | None:
    """A baseline kept in the session's directory; None when there is none (or it cannot be read)."""
    try:
        kept = json.loads(path.read_bytes())
        return {
            name: core.Before(
                core.Was(item["was"]),
                frozenset((key, value) for key, value in item["entries"]),
                base64.b64decode(item["raw"]),
            )
            for name, item in kept["files"].items()
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_before(path: Path, before: dict[str, core.Before]) -> None:
    """Keep a baseline in the session's directory: written whole to a private file (0600), then renamed into place."""
    files = {
        name: {
            "was": item.was.value,
            "entries": sorted(item.entries, key=lambda entry: (entry[0], entry[1] is None, entry[1] or "")),
            "raw": base64.b64encode(item.raw).decode("ascii"),
        }
        for name, item in before.items()
    }
    partial = path.with_name(path.name + ".partial")
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)
        fd = create_private_file(partial)  # 0600 whatever the umask: the user's config files are in it
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps({"files": files}))
        os.replace(partial, path)


class GitGuard:
    """One session's watch and audit of the git directories below its writable roots; `kept`: the file its
    baseline is kept in (None: it lives as long as the guard)."""

    def __init__(self, kept: Path | None = None) -> None:
        self.notices: list[str] = []
        self.kept = kept
        self._roots: list[str] = []
        self._own: dict[int, str] = {}  # repositories' own git directories (a commondir there is undone), by watch
        self._audited: dict[int, str] = {}  # every other directory whose config and index changes start an audit
        self._inotify: Inotify | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._audit_pending = False
        self._before: dict[str, core.Before] | None = None  # config files before the session's first launch
        self._gitdirs: set[str] = set()  # the git directories found at the roots, audited each time
        self._clean: dict[str, tuple[int, ...]] = {}  # config files as the last audit left them
        self._bare_roots: set[str] = set()  # writable roots that had no .git when a launch started
        self._made: set[str] = set()  # the git directories of repositories a job made at one of those roots

    def watch(self, roots: Sequence[str], found: Sequence[GitDirFound]) -> None:
        """Watch the git directories found for a launch below the writable `roots` (`found`; a commondir is undone
        only in those holding none), and remember the roots the audits look under. Takes the baseline at the first
        launch, and sweeps first: what was made before the watch is undone."""
        self._roots = list(dict.fromkeys([*self._roots, *roots]))
        self._find_made()  # a .git that appeared since a launch that saw none is a job's, before it is looked at again
        self._bare_roots.update(root for root in roots if not os.path.lexists(os.path.join(root, ".git")))
        gitdirs = [gitdir.path for gitdir in found]
        if self._before is None:  # the user's own config files, as they were before any confined launch
            kept = load_before(self.kept) if self.kept is not None else None
            nested = [gitdir for root in roots for gitdir in self._nested_gitdirs(root)]
            self._before = kept if kept is not None else take_before([*gitdirs, *nested])
            self.keep()
        self._gitdirs.update(gitdirs)
        own = [gitdir.path for gitdir in found if "commondir" not in gitdir.present]
        for gitdir in own:
            self._undo_commondir(gitdir)
        with contextlib.suppress(RuntimeError):
            self._start(asyncio.get_running_loop())
        if self._inotify is None:
            return
        for gitdir in own:
            if gitdir not in self._own.values():
                with contextlib.suppress(OSError):
                    self._own[self._inotify.add(gitdir)] = gitdir
        for place in found:
            for directory in (place.path, *(worktree for worktree, _ in place.worktrees)):
                self._watch_config(directory)

    def keep(self, kept: Path | None = None) -> None:
        """Keep the baseline in its file (`kept`: a new one, as when the session moves to a new directory)."""
        if kept is not None:
            self.kept = kept
        if self.kept is not None and self._before is not None:
            save_before(self.kept, self._before)

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
            gitdir = self._own.get(wd)
            if mask & IN_Q_OVERFLOW:
                for known in list(self._own.values()):
                    self._undo_commondir(known)
                self._clean.clear()  # what was missed is read again
                self._schedule_audit()
            elif gitdir is not None and name == core.UNEXPECTED_IN_GITDIR:
                self._undo_commondir(gitdir)
            elif name in TRIGGERS:
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
        """Check the config files of every git directory found at the roots, every gitlinked nested repository and
        every repository a job made at a root; undo what `core.undo_plan` refuses, and a made repository's hooks."""
        self._find_made()
        for gitdir in sorted(self._made):
            self._undo_commondir(gitdir)
            self._undo_hooks(gitdir)
        nested = [gitdir for root in self._roots for gitdir in self._nested_gitdirs(root)]
        for gitdir in sorted({*self._gitdirs, *self._made, *nested}):
            for path in config_files(gitdir):
                self._audit_config(path)
            self._watch_config(gitdir)

    def _watch_config(self, directory: str) -> None:
        """Audit again when a config or the index in this directory changes."""
        known = {*self._own.values(), *self._audited.values()}
        if self._inotify is not None and directory not in known:
            with contextlib.suppress(OSError):
                self._audited[self._inotify.add(directory)] = directory

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
            self._say(f"eukhe could not remove {path} ({error.strerror}): remove it before you run git")
            return
        self._say(f"eukhe removed {path}, which a confined command made: {what}")

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

    def _audit_config(self, path: str) -> None:
        """Undo what a confined command added to one config file that would run code (the baseline's entries
        stay); a config it cannot read as git does is put back (`core.put_back`)."""
        directory, name = os.path.split(path)
        try:
            dir_fd = open_dir(directory)
        except OSError:
            return  # no such git directory (any more), or a link on the way: git does not reach it by that path
        try:
            self._audit_in(dir_fd, path, name)
        finally:
            os.close(dir_fd)

    def _audit_in(self, dir_fd: int, path: str, name: str) -> None:
        for _ in range(ATTEMPTS):
            try:
                self._audit_once(dir_fd, path, name)
            except RacedError:
                continue
            return
        self._say(f"eukhe could not check {path}: it kept changing while eukhe read it; look at it before you run git")

    def _audit_once(self, dir_fd: int, path: str, name: str) -> None:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            self._clean.pop(path, None)
            return
        if self._clean.get(path) == signature(info):
            return
        before = (self._before or {}).get(path, core.ABSENT)
        try:
            raw, entries = read_config(dir_fd, name)
            if signature(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) != signature(info):
                raise RacedError(name)
        except FileNotFoundError:
            return
        except UnreadableConfigError as why:
            self._put_back(dir_fd, path, before, str(why), info)
            return
        plan = core.undo_plan(entries, before.entries)
        if not plan and info.st_nlink == 1:
            self._clean[path] = signature(info)
            return
        fixed = fixed_config(raw, plan)
        if fixed is None:
            keys = ", ".join(undo.key for undo in plan)
            self._say(f"eukhe could not remove {keys} from {path}: remove them before you run git")
            return
        try:
            done = install(dir_fd, name, fixed, stat.S_IMODE(info.st_mode), signature(info))
        except OSError as error:  # a RacedError is no OSError: it goes up, to read again
            self._say(f"eukhe could not rewrite {path} ({error.strerror}): look at it before you run git")
            return
        self._clean[path] = signature(done)
        for undo in plan:
            self._say(
                f"eukhe removed {undo.key} from {path}, which a confined command wrote: {undo.why}, which your next "
                "git command outside eukhe would follow (set it yourself, outside eukhe, if you want it)"
            )
        if not plan:
            self._say(f"eukhe replaced {path} by a copy: a confined command had linked it to another name")

    def _say(self, notice: str) -> None:
        """Keep a notice for the next answer, once (a job that writes the same key again meanwhile is told once)."""
        if notice not in self.notices:
            self.notices.append(notice)

    def _put_back(self, dir_fd: int, path: str, before: core.Before, why: str, info: os.stat_result) -> None:
        """A config the audit cannot read: put back as it was before the session, removed, or left (the user's)."""
        action, name = core.put_back(before), os.path.basename(path)
        try:
            if action is core.PutBack.RESTORE:
                self._clean[path] = signature(install(dir_fd, name, before.raw, 0o644, None))
                self._say(f"eukhe put {path} back as it was before the session: {why}")
            elif action is core.PutBack.REMOVE:
                os.unlink(name, dir_fd=dir_fd)
                self._say(f"eukhe removed {path}, which a confined command made: {why}")
            else:
                self._clean[path] = signature(info)
                self._say(f"eukhe could not check {path} ({why}): look at it before you run git")
        except OSError as error:
            self._clean[path] = signature(info)  # said once, not at each audit
            self._say(f"eukhe could not put back {path} ({error.strerror}): look at it before you run git")

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
