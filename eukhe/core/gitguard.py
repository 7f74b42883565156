"""Which git state a confined job may not leave behind: what would make the user's next git command, outside eukhe,
run a program or read config from a place the job chose (docs/sandbox.md, "git").

A session's sandbox keeps each git directory below its writable roots in place and read-only where git reads its
config and hooks (`eukhe.core.sandbox.git_mounts`). What cannot be mounted read-only in advance, because it does not
exist yet, is checked here and undone by the shell:
- a `commondir` made in a repository's own git directory: git would take config and hooks from where it points;
- a config that a job wrote in a nested repository it linked into the index (a gitlink): the user's `git status`
  in the outer repository runs `git status` in it, with that config;
- a repository a job made (`git init`) at a writable root that had none when a launch started: its config and hooks
  were the job's to write until the next launch protects them, so what in them would run code is undone.

Config keys are git's canonical names, as `git config --list` prints them: the section and the key's name in lower
case, a subsection as written (`diff.jpg.textconv`, `includeif.gitdir:~/x/.path`).
"""

from __future__ import annotations

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
    }
)
"""Keys (without a subsection) that name a program git runs, or a file it reads for more config, hooks or
templates."""

SUBSECTION_KEYS: dict[str, frozenset[str]] = {
    "diff": frozenset({"textconv", "command"}),
    "filter": frozenset({"clean", "smudge", "process"}),
    "merge": frozenset({"driver"}),
    "credential": frozenset({"helper"}),
    "gpg": frozenset({"program"}),
    "remote": frozenset({"uploadpack", "receivepack", "vcs", "proxy"}),
    "difftool": frozenset({"cmd", "path"}),
    "mergetool": frozenset({"cmd", "path"}),
    "browser": frozenset({"cmd", "path"}),
    "man": frozenset({"cmd", "path"}),
    "includeif": frozenset({"path"}),
    "url": frozenset({"insteadof", "pushinsteadof"}),
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
