"""File modes and the working-dir verdict ("Local access" 3-4).

The shell reads what stat found at a path and asks here what to do; the modes every eukhe-made file and
directory get at creation are defined once, here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

PRIVATE_FILE_MODE = 0o600
"""Mode of every file eukhe makes for a session, given at creation (never chmod afterwards)."""
PRIVATE_DIR_MODE = 0o700
"""Mode of every directory eukhe makes, given at creation."""

CWD_MISSING_TEXT = "a session needs a working directory"
CWD_GONE_TEXT = "working directory is gone"
CWD_NOT_DIR_TEXT = "working directory is not a directory"


class CwdFact(enum.Enum):
    """What the shell found when it looked at a session's working directory."""

    NONE = "none"  # no directory was named (None or the empty string)
    MISSING = "missing"  # nothing exists at the path
    NOT_DIR = "not_dir"  # something exists but it is not a directory (after following symlinks)
    DIR = "dir"  # a directory


@dataclass(frozen=True, slots=True)
class CwdOpens:
    """The working dir may be used."""


@dataclass(frozen=True, slots=True)
class CwdRefused:
    """The working dir may not be used; `text` is the spec's exact refusal."""

    text: str


CwdVerdict = CwdOpens | CwdRefused


def judge_cwd(fact: CwdFact) -> CwdVerdict:
    """The working-dir verdict ("Local access" 4): only an existing directory opens; nothing substitutes."""
    if fact is CwdFact.NONE:
        return CwdRefused(CWD_MISSING_TEXT)
    if fact is CwdFact.MISSING:
        return CwdRefused(CWD_GONE_TEXT)
    if fact is CwdFact.NOT_DIR:
        return CwdRefused(CWD_NOT_DIR_TEXT)
    return CwdOpens()
