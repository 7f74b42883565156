"""Local access: the socket-dir verdict, the peer rule, the creation modes and the working-dir verdict.

Spec "Local access" 1-4. The shell reads facts (what lstat found at the socket dir, its owner uid and mode bits,
the peer's SO_PEERCRED uid, what stat found at a cwd) and asks here what to do; every decision lives in this module.
The whole domain is finite, so the laws in tests/laws/test_fsmode_laws.py check it exhaustively.

Theory of operation for the socket dir: the shell lstats the directory and calls `judge_socket_dir`. `Create` means
"make it (and missing parents) with `mode` in one step, then look again with `created=True`"; `Use` means bind
there; `SocketDirRefused` means the daemon does not start, and `refusal_message` names the directory, the fault and
the fix. A directory that is missing again after it was created is refused, so the check always ends in two looks.

The facts are checked where they enter (law `fsmode_ffi`): a `SocketDirFact` with a uid, mode, kind or look no
lstat gives, a peer or daemon uid that is no uid, a working-dir fact or a made kind that is not a member, raise one
`AccessFactError` naming the first wrong field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from eukhe.core.fact_errors import FactError, is_count

PRIVATE_FILE_MODE = 0o600
"""Mode of every file eukhe makes for a session, given at creation (never chmod afterwards)."""
PRIVATE_DIR_MODE = 0o700
"""Mode of every directory eukhe makes, given at creation."""
PRIVATE_SOCKET_MODE = 0o600
"""Mode every listening socket file gets right after its bind; if it cannot be set, the bind fails."""

GROUP_OTHER_WRITE = 0o022
"""The bits that let someone other than the owner replace a socket in its directory."""

MAX_MODE = 0o7777
"""The largest permission bits a mode has (st_mode & 0o7777)."""

CWD_MISSING_TEXT = "a session needs a working directory"
CWD_GONE_TEXT = "working directory is gone"
CWD_NOT_DIR_TEXT = "working directory is not a directory"


class AccessFactError(FactError):
    """A local-access fact no lstat, stat or SO_PEERCRED gives (law `fsmode_ffi`): `field` names the first wrong one."""

    what = "a local-access fact"


def _check_uid(field: str, value: object) -> None:
    if not is_count(value):
        raise AccessFactError(field, value)


# --- the working dir ("Local access" 4) -------------------------------------------------------------------------


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
    if not isinstance(fact, CwdFact):
        raise AccessFactError("cwd", fact)
    if fact is CwdFact.NONE:
        return CwdRefused(CWD_MISSING_TEXT)
    if fact is CwdFact.MISSING:
        return CwdRefused(CWD_GONE_TEXT)
    if fact is CwdFact.NOT_DIR:
        return CwdRefused(CWD_NOT_DIR_TEXT)
    return CwdOpens()


# --- the socket dir ("Local access" 1) --------------------------------------------------------------------------


class Found(enum.Enum):
    """What lstat found at the socket directory (symlinks are not followed)."""

    MISSING = "missing"  # nothing at the path (or a parent is missing)
    SYMLINK = "symlink"  # a symbolic link, wherever it points
    NOT_DIR = "not_dir"  # a file, socket, fifo or device
    DIR = "dir"  # a real directory


@dataclass(frozen=True, slots=True)
class SocketDirFact:
    """The facts the shell read about a socket directory, and whether this look follows our own creation."""

    found: Found
    owner_uid: int  # st_uid of what lstat found (ignored unless found is DIR)
    mode: int  # permission bits, st_mode & 0o7777 (ignored unless found is DIR)
    daemon_uid: int  # getuid() of the daemon
    created: bool = False  # True on the look right after the shell created the directory

    def __post_init__(self) -> None:
        if not isinstance(self.found, Found):
            raise AccessFactError("found", self.found)
        _check_uid("owner_uid", self.owner_uid)
        if not is_count(self.mode) or self.mode > MAX_MODE:
            raise AccessFactError("mode", self.mode)
        _check_uid("daemon_uid", self.daemon_uid)
        if not isinstance(self.created, bool):
            raise AccessFactError("created", self.created)


class Fault(enum.Enum):
    """Why a socket directory is refused; each names its fix."""

    SYMLINK = "symlink"  # a link could point anywhere, so it is never followed
    NOT_DIR = "not_dir"  # something other than a directory sits at the path
    OWNER = "owner"  # the directory belongs to another uid
    MODE = "mode"  # group or other may write, so they could replace the socket
    VANISHED = "vanished"  # missing again right after it was created


@dataclass(frozen=True, slots=True)
class Create:
    """Create the directory and its missing parents with `mode` each, in one step per directory, then look again."""

    mode: int = PRIVATE_DIR_MODE


@dataclass(frozen=True, slots=True)
class Use:
    """The directory is private: bind the socket there."""


@dataclass(frozen=True, slots=True)
class SocketDirRefused:
    """The daemon does not start: `fault` says why, `owner_uid`/`mode` carry what was found."""

    fault: Fault
    owner_uid: int | None = None
    mode: int | None = None


SocketDirVerdict = Create | Use | SocketDirRefused

FIX_REMOVE = "remove the path"
FIX_CHMOD = "run `chmod go-w {path}` on your own directory"
FIX_OTHER_DIR = "give --daemon-socket a path in a private directory"


def judge_socket_dir(fact: SocketDirFact) -> SocketDirVerdict:
    """The socket-dir verdict: create a missing dir once, use only a private real dir of ours, else refuse."""
    if not isinstance(fact, SocketDirFact):
        raise AccessFactError("socket_dir", fact)
    if fact.found is Found.MISSING:
        return SocketDirRefused(Fault.VANISHED) if fact.created else Create(PRIVATE_DIR_MODE)
    if fact.found is Found.SYMLINK:
        return SocketDirRefused(Fault.SYMLINK)
    if fact.found is Found.NOT_DIR:
        return SocketDirRefused(Fault.NOT_DIR)
    if fact.owner_uid != fact.daemon_uid:
        return SocketDirRefused(Fault.OWNER, owner_uid=fact.owner_uid)
    if fact.mode & GROUP_OTHER_WRITE:
        return SocketDirRefused(Fault.MODE, mode=fact.mode & 0o7777)
    return Use()


def refusal_fix(refused: SocketDirRefused, path: str) -> str:
    """The fix the error names for a refused socket dir."""
    if refused.fault in (Fault.SYMLINK, Fault.NOT_DIR):
        return f"{FIX_REMOVE}, or {FIX_OTHER_DIR}"
    if refused.fault is Fault.MODE:
        return f"{FIX_CHMOD.format(path=path)}, or {FIX_OTHER_DIR}"
    return FIX_OTHER_DIR


def refusal_message(refused: SocketDirRefused, path: str) -> str:
    """One line naming the directory, the fault and the fix."""
    if refused.fault is Fault.SYMLINK:
        fault = "is a symlink"
    elif refused.fault is Fault.NOT_DIR:
        fault = "is not a directory"
    elif refused.fault is Fault.OWNER:
        fault = f"is owned by uid {refused.owner_uid}, not by this user"
    elif refused.fault is Fault.MODE:
        fault = f"has mode {refused.mode or 0:04o}: group or others may write to it"
    else:
        fault = "vanished right after it was created"
    return f"unsafe daemon socket directory {path}: it {fault}; fix: {refusal_fix(refused, path)}"


# --- socket peers ("Local access" 2) ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerAccepted:
    """The peer is the daemon's own user: serve it."""


@dataclass(frozen=True, slots=True)
class PeerRefused:
    """Close the peer before reading a frame and log its uid (None: its uid could not be read)."""

    peer_uid: int | None


PeerVerdict = PeerAccepted | PeerRefused


def judge_peer(peer_uid: int | None, daemon_uid: int) -> PeerVerdict:
    """The peer rule: only the daemon's own uid is served; an unreadable uid is refused too."""
    if peer_uid is not None:
        _check_uid("peer_uid", peer_uid)
    _check_uid("daemon_uid", daemon_uid)
    if peer_uid is not None and peer_uid == daemon_uid:
        return PeerAccepted()
    return PeerRefused(peer_uid)


# --- creation modes ("Local access" 3) --------------------------------------------------------------------------


class Made(enum.Enum):
    """Each kind of filesystem object eukhe makes."""

    FILE = "file"  # main.jsonl, sidecars, artifacts, staged copies, logs
    DIR = "dir"  # agent dir, sessions root, session dirs, staging dirs, the socket dir
    SOCKET = "socket"  # a listening socket file, right after its bind


def creation_mode(made: Made) -> int:
    """The mode an object gets at its creation: owner only, nothing for group or others."""
    if not isinstance(made, Made):
        raise AccessFactError("made", made)
    if made is Made.DIR:
        return PRIVATE_DIR_MODE
    if made is Made.SOCKET:
        return PRIVATE_SOCKET_MODE
    return PRIVATE_FILE_MODE
