"""When the sandbox refused: which rule of the policy caused a confined run's failure, and the one line that says so
(docs/sandbox.md "When the sandbox refused").

A confined command that meets the policy fails with an ordinary error (`Read-only file system`, `No such file or
directory`, `Could not resolve host`), which says nothing of the sandbox. The file tools name the rule and the way
on (`Denied.message`); a failed bash run or cell ends with one line that does the same, and only when the policy is
the cause.

Theory of operation.
- `clues(text)` reads the end of a failed run's kept output (at most `SCAN_LINES` lines, `SCAN_CHARS` characters)
  line by line against `MESSAGES`: each error message there, with the paths its line names (quoted, or the word
  right before `: MESSAGE`), is a clue. A message is only a symptom; nothing is decided from the text alone.
- Each path of a clue is a sandbox path (a relative one starts at the working directory). `host_path` maps it to the
  host's (under the private /tmp, into the session's own directory), and `probes` lists what the shell must look at
  on the host (`Seen`: the real path, whether something is there, whether the host's own file system is read-only).
- `decide` asks the layers (`eukhe.core.sandbox`) about each clue, in the order of the text, and the first the
  policy explains is the refusal (`CAUSES` is the table):
  - a write that met a read-only file system, at a path `access` refuses to write, on a host file system that is
    itself writable: `outside_writable_roots`, `read_only`, `protected` or `deny_read`;
  - `Device or resource busy` at a path the sandbox mounted (a pinned git directory, a protected file or directory,
    a mask): a mount point cannot be renamed, removed or replaced;
  - a path missing under a masked one (`deny_read`, or eukhe's own directories): the mask is empty; or missing in
    the private /tmp while the host's /tmp has it (`private_tmp`);
  - a failed name resolution or route with the network off (`network_off`), or an allowlist (`network_allowlist`:
    the sandbox resolves no name and has no route; only the proxy leads out);
  - with the network an allowlist, a connection the proxy refused while the run ran (`network_refusal`: the
    proxy's own record, not the output, names the host).
  Everything else (a permission error on a file the job can write, a missing file the host has not either, a
  compiler's error, the network failing while it is on) is not the sandbox's doing: no line.

Only a failed run is read (a non-zero exit, a cell that raised), and only its kept window's end, once, when it
ended: the scan is bounded whatever the output.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from eukhe.core.pathmap import is_within, normalize
from eukhe.core.render import render
from eukhe.core.sandbox import SANDBOX_TMP, Denied, Facts, Kind, Layer, Mode, Network, Want, access, deciding, layers

SCAN_LINES = 200
"""How many lines at the end of a failed run's window are read: an error is reported where the run stopped."""
SCAN_CHARS = 32_768
"""How many characters at the end of the window are read, whatever its lines."""
MAX_CLUES = 32
"""How many clues are weighed at most (each may make the shell look at a path on the host)."""


class Symptom(enum.Enum):
    """What an error message says happened."""

    READ_ONLY = "read_only"  # EROFS: a write met a read-only mount
    BUSY = "busy"  # EBUSY: a mount point renamed or removed, a bound file replaced
    MISSING = "missing"  # ENOENT: nothing there (a masked directory shows empty)
    OFFLINE = "offline"  # no name resolution, no route: what a network namespace of its own gives


MESSAGES: tuple[tuple[Symptom, str], ...] = (
    (Symptom.READ_ONLY, r"read-only file system"),  # strerror(EROFS); Go, Node and Rust print it too
    (Symptom.BUSY, r"device or resource busy"),  # strerror(EBUSY)
    (Symptom.MISSING, r"no such file or directory"),  # strerror(ENOENT)
    (Symptom.OFFLINE, r"temporary failure in name resolution"),  # EAI_AGAIN: Python, pip, ssh
    (Symptom.OFFLINE, r"name or service not known"),  # EAI_NONAME
    (Symptom.OFFLINE, r"could not resolve (?:host|proxy)"),  # curl, git, ssh ("hostname")
    (Symptom.OFFLINE, r"unable to resolve host"),  # wget
    (Symptom.OFFLINE, r"network is unreachable"),  # ENETUNREACH: Python, Go, pip's retries
    (Symptom.OFFLINE, r"getaddrinfo (?:eai_again|enotfound)"),  # Node, npm
    (Symptom.OFFLINE, r"failed to connect to (?!localhost\b|127\.|\[?::1\]?\b)\S+ port"),  # curl, off the loopback
)
"""The error messages that may mean the sandbox refused, each with what it says (matched case-insensitively).
pip's `No matching distribution found` is not here: with the network off it comes after its connection errors,
which are; alone (a local index without the package) it is not the sandbox's doing."""

_MESSAGES = tuple((symptom, re.compile(pattern, re.IGNORECASE)) for symptom, pattern in MESSAGES)
_QUOTED = re.compile(r"'([^'\n]+)'|\u2018([^\u2019\n]+)\u2019|\"([^\"\n]+)\"|`([^`'\n]+)'|`([^`'\n]+)`")
"""A quoted name: 'x' (coreutils, Python, Node), \u2018x\u2019 (coreutils in a UTF-8 locale), "x", `x', `x` (Rust's
tools: uv, cargo)."""
_BEFORE = re.compile(r"([^\s:'\"\u2018\u2019`]+)\s*:\s*$")
"""The word right before `: MESSAGE` (bash's redirections, git, Go: `open /usr/x: read-only file system`)."""


@dataclass(frozen=True, slots=True)
class Clue:
    """One error message of the output: what it says, and a path its line names (None for the network's).
    `path` is as the message wrote it: a relative one starts at the working directory."""

    symptom: Symptom
    path: str | None = None


def clues(text: str) -> tuple[Clue, ...]:
    """The clues of the end of a failed run's output, in its order (each once, at most `MAX_CLUES`)."""
    tail = render(text[-SCAN_CHARS:]).splitlines()[-SCAN_LINES:]
    found: dict[Clue, None] = {}
    for line in tail:
        for symptom, pattern in _MESSAGES:
            match = pattern.search(line)
            if match is None:
                continue
            if symptom is Symptom.OFFLINE:
                found.setdefault(Clue(symptom))
                continue
            for path in _paths(line, match.start()):
                found.setdefault(Clue(symptom, path))
        if len(found) >= MAX_CLUES:
            break
    return tuple(found)[:MAX_CLUES]


def _paths(line: str, at: int) -> list[str]:
    """The paths a line names around its message at `at`: the word right before it, then each quoted name."""
    paths: list[str] = []
    before = _BEFORE.search(line[:at])
    if before is not None:
        paths.append(before.group(1))
    for match in _QUOTED.finditer(line):
        paths.append(next(group for group in match.groups() if group is not None))
    return [path for path in dict.fromkeys(paths) if "\0" not in path and path.strip() == path]


class Rule(enum.StrEnum):
    """Which rule of the policy refused."""

    OUTSIDE_WRITABLE_ROOTS = "outside_writable_roots"  # a write outside the writable roots
    READ_ONLY = "read_only"  # a write under a read_only policy
    PROTECTED = "protected"  # a write into a protected path (.git/hooks, .eukhe, .agents, .claude, ...)
    PINNED = "pinned"  # a git directory moved, removed or replaced
    DENY_READ = "deny_read"  # a path under a `deny_read` one
    EUKHE_DIRS = "eukhe_dirs"  # a path under eukhe's own directories, always hidden
    PRIVATE_TMP = "private_tmp"  # a path of the host's /tmp, which the session's own hides
    NETWORK_OFF = "network_off"  # the network, with the policy's network off
    NETWORK_ALLOWLIST = "network_allowlist"  # a host the allowlist's proxy refused, or no route with an allowlist


@dataclass(frozen=True, slots=True)
class Seen:
    """What the shell found at a host path: its real path (symlinks resolved as far as something is there), whether
    something is there, and whether the host's own file system holding it is read-only (then the sandbox is not
    why a write failed)."""

    real: str
    exists: bool = False
    read_only_fs: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """The rule that refused a confined run, the path as its error named it (None for the network), and `root`:
    what the rule is about (the protected path, the masked directory; else the path on the host)."""

    rule: Rule
    path: str | None = None
    root: str | None = None

    def line(self) -> str:
        """The one line an answer ends with: the rule, what it did, what to do instead, and the user's way on."""
        what, instead, user = _words(self)
        return f"sandbox refused ({self.rule}): {what}; {instead}; {user}"


def _words(refusal: Refusal) -> tuple[str, str, str]:
    """What the rule did, what the model can do instead, and how the user can allow it (a session keeps the policy
    it was made with: the user's way on is for a new session)."""
    path, root = refusal.path or "", refusal.root or ""
    rule = refusal.rule
    if rule is Rule.OUTSIDE_WRITABLE_ROOTS:
        return (
            f"{path} is outside the writable roots, so it is read-only here",
            "write under the working directory or /tmp instead",
            "to allow it, the user adds it to sandbox.writable_roots, or starts a session with --sandbox off",
        )
    if rule is Rule.READ_ONLY:
        return (
            f"the session is read_only, so {path} cannot be written",
            "write under /tmp instead",
            "to allow writes, the user starts a session with --sandbox workspace_write",
        )
    if rule is Rule.PROTECTED:
        return (f"{root} is protected inside the writable roots{_protected_why(root)}", *_protected_way(root))
    if rule is Rule.PINNED:
        return (
            f"{root} is a git directory the sandbox keeps in place (it cannot be moved, removed or replaced)",
            "change what is inside it instead (git add, commit and fetch work)",
            "the user can do it outside eukhe, or in a session with --sandbox off",
        )
    if rule is Rule.DENY_READ:
        return (
            f"{root} is hidden by sandbox.deny_read (it shows empty, as if nothing were there)",
            "do without it",
            "to allow it, the user takes it out of sandbox.deny_read, or starts a session with --sandbox off",
        )
    if rule is Rule.EUKHE_DIRS:
        return (
            f"{root} is one of eukhe's own directories, which no confined process sees",
            "work in the working directory instead",
            "only a session with --sandbox off sees it",
        )
    if rule is Rule.PRIVATE_TMP:
        return (
            f"/tmp here is the session's own, so the host's {path} is not seen",
            "put what the run needs in the working directory instead",
            "the user can copy it there, or start a session with --sandbox off",
        )
    if rule is Rule.NETWORK_ALLOWLIST:
        refused = (
            f", and its proxy refused {root}" if root else " (no name resolves and there is no route but its proxy)"
        )
        return (
            f"the network is an allowlist in this session{refused}",
            "reach allowed hosts instead, through the proxy HTTP_PROXY and HTTPS_PROXY name (curl, pip, git, npm "
            "and urllib use it), or work offline",
            "to allow a host, the user adds it to sandbox.allow_domains, or starts a session with --allow-domain NAME "
            "(or --network on)",
        )
    return (
        "the network is off in this session (only its own loopback answers)",
        "work offline instead: local files, a local wheel or index, what the caches hold",
        "to allow it, the user starts a session with --network on",
    )


def _protected_why(root: str) -> str:
    name = root.rsplit("/", 1)[-1]
    if name in ("config", "config.worktree"):
        return " (git config could run code on the user's next git command)"
    if name == "hooks":
        return " (a hook would run on the user's next git command)"
    if name in ("commondir", "gitdir", ".git"):
        return " (it tells git where its config and hooks are)"
    return " (it could loosen the next session, offer the next model a skill, or run a hook in the user's agent)"


def _protected_way(root: str) -> tuple[str, str]:
    name = root.rsplit("/", 1)[-1]
    if name in ("config", "config.worktree"):
        instead = "pass config per command instead: git -c user.name=NAME -c user.email=EMAIL commit ..."
    elif name == "hooks":
        instead = "run the hook's checks yourself instead"
    else:
        instead = "write elsewhere instead, and leave it as it is"
    return instead, "the user can change it outside eukhe, or in a session with --sandbox off"


def host_path(facts: Facts, path: str) -> str:
    """The host path of a path a confined process named: relative ones start at the working directory; one under
    the private /tmp (which only a deeper mount covers otherwise) is in the session's own directory."""
    absolute = normalize(path if path.startswith("/") else facts.cwd + "/" + path)
    if _in_private_tmp(layers(facts), absolute):
        return normalize(facts.tmp + absolute[len(SANDBOX_TMP) :])
    return absolute


def _in_private_tmp(all_layers: Sequence[Layer], path: str) -> bool:
    """Whether the sandbox shows `path` from the private /tmp: the host's /tmp decides for it."""
    layer = deciding(all_layers, path)
    return layer.path == SANDBOX_TMP and layer.kind is Kind.DENY


def probes(facts: Facts, found: Sequence[Clue]) -> tuple[str, ...]:
    """The host paths the shell looks at for `decide` (`Seen`): each clue's, and for a path missing in the private
    /tmp, the host's own /tmp path too. None when the policy could not have caused them (unconfined)."""
    if facts.mode is Mode.OFF:
        return ()
    all_layers = layers(facts)
    wanted: list[str] = []
    for clue in found:
        if clue.path is None:
            continue
        wanted.append(host_path(facts, clue.path))
        absolute = normalize(clue.path if clue.path.startswith("/") else facts.cwd + "/" + clue.path)
        if clue.symptom is Symptom.MISSING and _in_private_tmp(all_layers, absolute):
            wanted.append(absolute)
    return tuple(dict.fromkeys(wanted))


def decide(
    facts: Facts, found: Sequence[Clue], seen: Mapping[str, Seen], own: frozenset[str] = frozenset()
) -> Refusal | None:
    """The first clue, in the order of the output, that the policy explains (see the module docstring); None when
    none is the sandbox's doing. `seen`: what the shell found at each of `probes` (a path it has not seen is taken
    as missing); `own`: eukhe's own directories among the denied ones (hidden whatever the policy says)."""
    if facts.mode is Mode.OFF:
        return None
    all_layers = layers(facts)
    for clue in found:
        refusal = _cause(facts, all_layers, clue, seen, own)
        if refusal is not None:
            return refusal
    return None


def _cause(
    facts: Facts, all_layers: Sequence[Layer], clue: Clue, seen: Mapping[str, Seen], own: frozenset[str]
) -> Refusal | None:
    if clue.symptom is Symptom.OFFLINE:
        return OFFLINE_RULES.get(facts.network)
    assert clue.path is not None
    lexical = host_path(facts, clue.path)
    look = seen.get(lexical, Seen(lexical))
    candidates = tuple(dict.fromkeys((look.real, lexical)))
    if clue.symptom is Symptom.READ_ONLY:
        if look.read_only_fs:
            return None  # the host's own file system is read-only: so would it be without the sandbox
        return _first(_denied(facts, path, Want.WRITE, clue.path, own) for path in candidates)
    if clue.symptom is Symptom.BUSY:
        return _first(_mount_point(all_layers, path, clue.path, own) for path in candidates)
    absolute = normalize(clue.path if clue.path.startswith("/") else facts.cwd + "/" + clue.path)
    if _in_private_tmp(all_layers, absolute):
        hidden = [path for path, _ in facts.denied if is_within(absolute, path)]
        if hidden:  # the host's path is masked too: whether something is there stays hidden
            root = max(hidden, key=len)
            return Refusal(Rule.EUKHE_DIRS if root in own else Rule.DENY_READ, clue.path, root)
        host = seen.get(absolute, Seen(absolute))
        return Refusal(Rule.PRIVATE_TMP, clue.path, absolute) if host.exists else None
    return _first(_masked(facts, path, clue.path, own) for path in candidates)


OFFLINE_RULES = {Network.OFF: Refusal(Rule.NETWORK_OFF), Network.ALLOWLIST: Refusal(Rule.NETWORK_ALLOWLIST)}
"""What no name resolution or no route means, by the policy's network (with it on, it is not the sandbox's)."""


def network_refusal(refused: Sequence[str]) -> Refusal | None:
    """The line for a failed run while the allowlist's proxy refused `refused` (each `name:port`, in order): the
    first one names it."""
    return Refusal(Rule.NETWORK_ALLOWLIST, None, refused[0]) if refused else None


def _first(refusals: Iterable[Refusal | None]) -> Refusal | None:
    return next((refusal for refusal in refusals if refusal is not None), None)


RULES_OF_ACCESS = {
    "outside_writable_roots": Rule.OUTSIDE_WRITABLE_ROOTS,
    "read_only": Rule.READ_ONLY,
    "protected": Rule.PROTECTED,
    "deny_read": Rule.DENY_READ,
}
"""The file tools' rules (`Denied.rule`) that a write failing on a read-only file system can meet. A cache is
copy-on-write (writes there succeed) and the private /tmp is writable: neither is here."""


def _denied(facts: Facts, path: str, want: Want, named: str, own: frozenset[str]) -> Refusal | None:
    verdict = access(facts, path, want)
    if not isinstance(verdict, Denied) or verdict.rule not in RULES_OF_ACCESS:
        return None
    rule = RULES_OF_ACCESS[verdict.rule]
    if rule is Rule.DENY_READ and verdict.root in own:
        rule = Rule.EUKHE_DIRS
    return Refusal(rule, named, verdict.root)


def _masked(facts: Facts, path: str, named: str, own: frozenset[str]) -> Refusal | None:
    """A missing path under a mask: the mask is empty, so the policy is why (whatever the host has under it: a
    line that said whether it has something there would tell what the mask hides). A read is refused only there."""
    return _denied(facts, path, Want.READ, named, own)


MOUNT_RULES = {Kind.PIN: Rule.PINNED, Kind.PROTECT: Rule.PROTECTED, Kind.DENY: Rule.DENY_READ}
"""What a mount point of the sandbox is, by the kind of its layer, when a rename or removal of it is refused."""


def _mount_point(all_layers: Sequence[Layer], path: str, named: str, own: frozenset[str]) -> Refusal | None:
    """A layer mounted exactly at `path` (not the private /tmp, which is the sandbox's /tmp); of two at one path,
    the later decides, as its mount lies on top."""
    at = [layer for layer in all_layers if layer.path == path and layer.path != SANDBOX_TMP]
    if not at or at[-1].kind not in MOUNT_RULES:
        return None
    rule = MOUNT_RULES[at[-1].kind]
    if rule is Rule.DENY_READ and path in own:
        rule = Rule.EUKHE_DIRS
    return Refusal(rule, named, path)
