"""Local access: the socket-dir verdict, the peer rule, the creation modes and the working-dir verdict.

Spec "Local access" 1-4. The shell reads facts (what lstat found at the socket dir, its owner uid and mode bits,
the peer's SO_PEERCRED uid, what stat found at a cwd) and asks here what to do; every decision lives in this module.
The whole domain is finite, so the laws in tests/laws/test_fsmode_laws.py check it exhaustively.

Theory of operation for the socket dir: the shell lstats the directory and calls `judge_socket_dir`. `Create` means
"make it (and missing parents) with `mode` in one step, then look again with `created=True`"; `Use` means bind
there; `SocketDirRefused` means the daemon does not start, and `refusal_message` names the directory, the fault and
the fix. A directory that is missing again after it was created is refused, so the check always ends in two looks.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

PRIVATE_FILE_MODE = 0o600
"""Mode of every file eukhe makes for a session, given at creation (never chmod afterwards)."""
PRIVATE_DIR_MODE = 0o700
"""Mode of every directory eukhe makes, given at creation."""
PRIVATE_SOCKET_MODE = 0o600
"""Mode every listening socket file gets right after its bind; if it cannot be set, the bind fails."""

GROUP_OTHER_WRITE = 0o022
"""The bits that let someone other than the owner replace a socket in its directory."""

CWD_MISSING_TEXT = "a session needs a working directory"
CWD_GONE_TEXT = "working directory is gone"
CWD_NOT_DIR_TEXT = "working directory is not a directory"


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
    if made is Made.DIR:
        return PRIVATE_DIR_MODE
    if made is Made.SOCKET:
        return PRIVATE_SOCKET_MODE
    return PRIVATE_FILE_MODE


# --- the entry ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FsmodeMalformed:
    """The one refusal of the entry: the request is not one the shell writes."""

    code: str = "fsmode_malformed"


FSMODE_MALFORMED = FsmodeMalformed()
"""The exact refusal every malformed request gets."""

FsmodeReply = dict[str, object]
E = TypeVar("E", bound=enum.Enum)


def _uid(value: object) -> int | None:
    """A uid field: a non-negative int (not a bool), else None (malformed)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _enum_value(kind: type[E], value: object) -> E | None:
    """An enum member named by its string value, else None."""
    if not isinstance(value, str):
        return None
    for member in kind:
        if member.value == value:
            return member
    return None


def encode_socket_dir(verdict: SocketDirVerdict) -> FsmodeReply:
    """A socket-dir verdict as the entry's reply."""
    if isinstance(verdict, Create):
        return {"verdict": "create", "mode": verdict.mode}
    if isinstance(verdict, Use):
        return {"verdict": "use"}
    return {"verdict": "refuse", "fault": verdict.fault.value, "owner_uid": verdict.owner_uid, "mode": verdict.mode}


def encode_peer(verdict: PeerVerdict) -> FsmodeReply:
    """A peer verdict as the entry's reply."""
    if isinstance(verdict, PeerAccepted):
        return {"verdict": "accept"}
    return {"verdict": "refuse", "peer_uid": verdict.peer_uid}


def encode_cwd(verdict: CwdVerdict) -> FsmodeReply:
    """A working-dir verdict as the entry's reply."""
    if isinstance(verdict, CwdOpens):
        return {"verdict": "opens"}
    return {"verdict": "refused", "text": verdict.text}


_FIELDS: dict[str, frozenset[str]] = {
    "socket_dir": frozenset({"op", "found", "owner_uid", "mode", "daemon_uid", "created"}),
    "peer": frozenset({"op", "peer_uid", "daemon_uid"}),
    "cwd": frozenset({"op", "found"}),
    "mode": frozenset({"op", "made"}),
}


def fsmode_entry(request: Mapping[str, object]) -> FsmodeReply | FsmodeMalformed:
    """The core's one entry: a request as the shell writes it (a JSON object) -> the verdict, or FSMODE_MALFORMED.

    Requests: {"op": "socket_dir", "found", "owner_uid", "mode", "daemon_uid", "created"},
    {"op": "peer", "peer_uid" (int or null), "daemon_uid"}, {"op": "cwd", "found"}, {"op": "mode", "made"}.
    Every field is required, none extra; uids are non-negative ints, a mode is 0..0o7777.
    """
    if not isinstance(request, Mapping):
        return FSMODE_MALFORMED
    op = request.get("op")
    if not isinstance(op, str) or op not in _FIELDS or set(request) != _FIELDS[op]:
        return FSMODE_MALFORMED
    if op == "socket_dir":
        found = _enum_value(Found, request["found"])
        owner, daemon, mode, created = (
            _uid(request["owner_uid"]),
            _uid(request["daemon_uid"]),
            request["mode"],
            request["created"],
        )
        if found is None or owner is None or daemon is None or not isinstance(created, bool):
            return FSMODE_MALFORMED
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            return FSMODE_MALFORMED
        return encode_socket_dir(judge_socket_dir(SocketDirFact(found, owner, mode, daemon, created)))
    if op == "peer":
        raw_peer, daemon = request["peer_uid"], _uid(request["daemon_uid"])
        peer = None if raw_peer is None else _uid(raw_peer)
        if daemon is None or (raw_peer is not None and peer is None):
            return FSMODE_MALFORMED
        return encode_peer(judge_peer(peer, daemon))
    if op == "cwd":
        cwd = _enum_value(CwdFact, request["found"])
        return FSMODE_MALFORMED if cwd is None else encode_cwd(judge_cwd(cwd))
    made = _enum_value(Made, request["made"])
    return FSMODE_MALFORMED if made is None else {"mode": creation_mode(made)}
