"""Which git state a confined job may not leave behind: what would make the user's next git command, outside eukhe,
run a program or read config from a place the job chose (docs/sandbox.md, "git").

A session's sandbox keeps each git directory below its writable roots in place and read-only where git runs hooks
from (`eukhe.core.sandbox.git_mounts`). What cannot be mounted read-only, because git must write it or because it
does not exist yet, is checked here and undone by the shell:
- an entry a job adds to a repository's `config` (writable, so that `git config user.email`, `git remote add` and
  `git branch -m` work: git renames `config.lock` over it, which a read-only mount refuses) or to a `config.worktree`
  it makes: each one that would run code is unset; the entries the user had before the session's first confined
  launch stay, program keys too (`undo_plan`);
- a `commondir` made in a repository's own git directory: git would take config and hooks from where it points;
- a config that a job wrote in a nested repository it linked into the index (a gitlink): the user's `git status`
  in the outer repository runs `git status` in it, with that config;
- a repository a job made (`git init`) at a writable root that had none when a launch started: its config and hooks
  were the job's to write until the next launch protects them, so what in them would run code is undone.

Config keys are git's canonical names, as `git config --list` prints them: the section and the key's name in lower
case, a subsection as written (`diff.jpg.textconv`, `includeif.gitdir:~/x/.path`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

UNEXPECTED_IN_GITDIR = "commondir"
"""A name that a repository's own git directory never holds (only a linked worktree's directory under `worktrees/`
does): made by a job, it sends git elsewhere for config and hooks."""

PROGRAM_KEYS: frozenset[str] = frozenset(
    {
        "core.fsmonitor",
        "core.hookspath",
        "core.sshcommand",
        "core.editor",
        "core.pager",
        "core.askpass",
        "core.gitproxy",
        "core.alternaterefscommand",
        "core.worktree",
        "core.attributesfile",
        "core.excludesfile",
        "sequence.editor",
        "diff.external",
        "credential.helper",
        "gpg.program",
        "include.path",
        "init.templatedir",
        "interactive.difffilter",
        "uploadpack.packobjectshook",
        "sendemail.smtpserver",
        "sendemail.sendmailcmd",
        "web.browser",
        "commit.template",
        "mailmap.file",
        "blame.ignorerevsfile",
        "extensions.worktreeconfig",
        "protocol.allow",
        "imap.tunnel",
        "instaweb.httpd",
    }
)
"""Keys (without a subsection) that name a program git runs, or a file it reads for more config, hooks or
templates. `extensions.worktreeconfig` makes git read `config.worktree`, a file a job could make; `protocol.allow`
could let a remote's `ext::` address run a command."""

SUBSECTION_KEYS: dict[str, frozenset[str]] = {
    "diff": frozenset({"textconv", "command"}),
    "filter": frozenset({"clean", "smudge", "process"}),
    "merge": frozenset({"driver"}),
    "credential": frozenset({"helper"}),
    "gpg": frozenset({"program", "defaultkeycommand"}),
    "remote": frozenset({"uploadpack", "receivepack", "vcs", "proxy"}),
    "difftool": frozenset({"cmd", "path"}),
    "mergetool": frozenset({"cmd", "path"}),
    "browser": frozenset({"cmd", "path"}),
    "man": frozenset({"cmd", "path"}),
    "includeif": frozenset({"path"}),
    "url": frozenset({"insteadof", "pushinsteadof"}),
    "protocol": frozenset({"allow"}),
    "trailer": frozenset({"cmd", "command"}),
    "hook": frozenset({"command"}),
    "guitool": frozenset({"cmd"}),
    "sendemail": frozenset({"smtpserver", "sendmailcmd"}),
    "lfs": frozenset({"path", "clean", "smudge"}),
}
"""Keys of a section with a subsection (`diff.<driver>.textconv`) that run a program, read another file, or send
the user's fetches and pushes to another address."""

ANY_NAME_SECTIONS = frozenset({"pager"})
"""Sections whose every key names a program (`pager.<command>`)."""


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """A canonical config key split in three: section, subsection (None: none) and name."""

    section: str
    subsection: str | None
    name: str

    @classmethod
    def parse(cls, key: str) -> ConfigKey:
        """`section.name` or `section.sub.section.name` (a subsection may hold dots)."""
        section, _, rest = key.partition(".")
        subsection, dot, name = rest.rpartition(".")
        return cls(section.lower(), subsection if dot else None, (name if dot else rest).lower())


def runs_code(key: str, value: str) -> str | None:
    """Why a config entry may not stay in a repository a job wrote (None: it may): it runs a program, reads another
    file, or redirects the user's remote traffic."""
    parsed = ConfigKey.parse(key)
    if parsed.subsection is None:
        if f"{parsed.section}.{parsed.name}" in PROGRAM_KEYS:
            return f"{key} names a program or a file git reads"
        if parsed.section == "alias" and value.lstrip().startswith("!"):
            return f"{key} runs a shell command"
        if parsed.section in ANY_NAME_SECTIONS:
            return f"{key} names a program"
        return None
    if parsed.section in ANY_NAME_SECTIONS:
        return f"{key} names a program"
    if parsed.section == "alias" and value.lstrip().startswith("!"):
        return f"{key} runs a shell command"
    if parsed.section == "submodule" and parsed.name == "update" and value.lstrip().startswith("!"):
        return f"{key} runs a shell command"
    if parsed.name in SUBSECTION_KEYS.get(parsed.section, frozenset()):
        return f"{key} names a program, a file git reads, or another address"
    return None


HOOK_SAMPLE_SUFFIX = ".sample"
"""`git init` writes its example hooks with this suffix; git never runs them."""


def hook_runs(name: str) -> bool:
    """Whether git may run a file named `name` in a hooks directory: every name but the inert samples (and a
    hidden name, which no hook has)."""
    return not name.endswith(HOOK_SAMPLE_SUFFIX) and not name.startswith(".")


@dataclass(frozen=True, slots=True)
class Undo:
    """One key a job's entries are taken out of: `why` it may not stay, and `keep`, the values of that key there now
    that may stay (the user's own from before the session, and those that run no code), put back in their order
    once the key is unset."""

    key: str
    why: str
    keep: tuple[str | None, ...] = ()


Entry = tuple[str, str | None]
"""A config entry as `git config --list` reads it: the canonical key and its value (None: a key with no `=`, which
git reads as true)."""


def undo_plan(now: Sequence[Entry], before: frozenset[Entry]) -> tuple[Undo, ...]:
    """What to take out of a config whose entries are `now`, when `before` were there before the session: each key
    with an entry that `runs_code` refuses and that was not there before (each key once, in the order met)."""
    found: dict[str, str] = {}
    for key, value in now:
        if key not in found and (key, value) not in before and (why := runs_code(key, value or "")) is not None:
            found[key] = why
    return tuple(
        Undo(key, why, tuple(value for name, value in now if name == key and _stays(name, value, before)))
        for key, why in found.items()
    )


def _stays(key: str, value: str | None, before: frozenset[Entry]) -> bool:
    """Whether an entry may stay: it was there before, or it runs no code (an alias of that name that runs git)."""
    return (key, value) in before or runs_code(key, value or "") is None


class Was(enum.StrEnum):
    """What a config file was before the session's first confined launch."""

    ABSENT = "absent"  # not there (or in a git directory that was not there: a job made it)
    READ = "read"  # a config git read: its entries and its bytes are kept
    UNREADABLE = "unreadable"  # there, but not a config git could read as a file (a link, a huge file): the user's


@dataclass(frozen=True, slots=True)
class Before:
    """A config file before the session: the user's own, which the audits keep."""

    was: Was
    entries: frozenset[Entry] = frozenset()
    raw: bytes = b""


ABSENT = Before(Was.ABSENT)


class PutBack(enum.StrEnum):
    """What becomes of a config the audit cannot read as git would (a link, not a file, too large, not parsed)."""

    RESTORE = "restore"  # its bytes from before the session are written back
    REMOVE = "remove"  # it was not there before the session: it goes
    LEAVE = "leave"  # it was the user's and was already unreadable: left, with a notice


def put_back(before: Before) -> PutBack:
    """What to do with a config the audit cannot read: a job's link or huge file is never left where the user's
    git would follow or read it, and the user's own unreadable file is never destroyed."""
    if before.was is Was.READ:
        return PutBack.RESTORE
    return PutBack.REMOVE if before.was is Was.ABSENT else PutBack.LEAVE
