"""The sandbox policy: what a confined process and the file tools may read and write (docs/sandbox.md).

One policy holds on every path the agent reaches: bash jobs and the kernel run under bubblewrap with a mount plan
made here; the file tools ask `access` here before they act. Both read the same layers, so a path a confined command
cannot write is a path the file tools refuse to write.

Theory of operation.
- A policy is a mode (`workspace_write`, `read_only`, `off`), the network (`on`, `off`), extra writable roots, the
  `deny_read` paths, and the `env_passthrough` variables (the environment's rule is `eukhe.core.secret_env`).
  `tighten(user, project)` is the one scope rule: a project may only make the user's policy stricter; every looser
  key is named, and then the user's policy holds whole.
- `layers(facts)` turns a policy and what the shell found on disk (real paths that exist) into layers: the root is
  readable, the host's /tmp hidden (the session's private one shows there) except the user's home where it lies
  there (readable, as anywhere else), each writable root writable (under `read_only`, the working directory
  readable instead), each protected path and each read carve-out readable only, each denied path masked. The
  deepest layer holding a path decides for it (at one path, the later kind in `Kind` wins: a denial beats a grant),
  exactly as the deepest mount decides in the sandbox.
- `bwrap_argv(facts)` mounts the layers in that order (shallow first, so deeper ones land on top), then adds the
  namespaces: a pid namespace, `--unshare-net` when the network is off, a new session, no capabilities, and
  `--die-with-parent`.
- `access(facts, path, want)` is the file tools' verdict on a resolved host path: the deciding layer, plus the
  protected names (`.git/hooks`, `.git/commondir`, `.eukhe`, `.agents`) anywhere below a writable root.

Paths are text, absolute and symlink-free (the shell resolves them first, as the `outside` check does).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

from eukhe.core.allowlist import DEFAULT_ALLOWED_NAMES, DEFAULT_PORTS
from eukhe.core.pathmap import is_within, normalize, split


class Mode(enum.StrEnum):
    """How much a confined process may change."""

    WORKSPACE_WRITE = "workspace_write"  # the working directory, the writable roots, a private /tmp, caches
    READ_ONLY = "read_only"  # nothing of the host's (a private /tmp only)
    OFF = "off"  # not confined: the user's full rights


class Network(enum.StrEnum):
    """Whether a confined process reaches the network."""

    ON = "on"
    ALLOWLIST = "allowlist"  # its own network namespace; out only through eukhe's proxy, to the allowed names
    OFF = "off"  # its own network namespace: only its own loopback


STRICTNESS = {Mode.OFF: 0, Mode.WORKSPACE_WRITE: 1, Mode.READ_ONLY: 2}
"""Modes from the loosest to the strictest: a project may only move up."""

NETWORK_STRICTNESS = {Network.ON: 0, Network.ALLOWLIST: 1, Network.OFF: 2}
"""The network from the loosest to the strictest: a project may only move up."""

BRIDGE_DIR = "/tmp/.eukhe-net"
"""Where a sandbox with the network an allowlist sees the directory of eukhe's proxy socket (read-only)."""
BRIDGE_SOCKET = "proxy.sock"
"""The proxy's socket in that directory."""
PROXY_PORT = 3128
"""The port the sandbox's init listens on, on the sandbox's own loopback, for the proxy."""
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
NO_PROXY = "localhost,127.0.0.1,::1"
"""The sandbox's own loopback stays its own: a server a job runs there is reached directly."""
PROXY_ENV: tuple[tuple[str, str], ...] = (
    *(
        (name, PROXY_URL)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    ),
    ("NO_PROXY", NO_PROXY),
    ("no_proxy", NO_PROXY),
)
"""What a sandbox with the network an allowlist has in its environment: every proxy-aware tool (curl, git, pip, uv,
npm, cargo, go, Python's urllib) goes through the proxy; what ignores them has no route at all."""

PROTECTED_NAMES: tuple[tuple[str, ...], ...] = (
    (".git", "hooks"),
    (".git", "config.worktree"),
    (".git", "commondir"),
    (".eukhe",),
    (".agents",),
    (".claude",),
)
"""Inside a writable root, read-only even under `workspace_write`: what could loosen the next session, offer the
next model a planted skill, or run code on the user's next git command (git runs its hooks from there, and
`commondir` sends it to another directory for config and hooks). The rest of `.git` stays writable, so `git add`,
`git commit` and `git config` work: `.git/config` is writable, and the shell's git guard undoes each entry a
confined command adds there that would run a program or read another file (`eukhe.core.gitguard`). A mount plan
protects them directly below each writable root (`.eukhe`, `.agents` and `.claude` made first where they are
missing, so that a job cannot make them); the file tools refuse them at any depth."""

PROTECTED_DIRS: tuple[str, ...] = (".eukhe", ".agents", ".claude")
"""The protected names a confined launch makes (empty) where they are missing, so that no job can create them."""

GITDIR_PROTECTED: tuple[str, ...] = ("config.worktree", "hooks", "commondir")
"""In every git directory below a writable root (the repository's, each submodule's under `modules/`), what git
runs hooks from, reads a worktree's config from, or follows to another directory for them: read-only in a confined
launch. Its `config` is not here: git writes it by renaming `config.lock` over it, which a mount point would refuse
(`EBUSY`), so it stays writable and the git guard audits it instead. The git directory itself is pinned, so the
file renamed over is the one the guard watches (inotify watches the directory, which cannot be swapped)."""

WORKTREE_PROTECTED: tuple[str, ...] = ("commondir", "config.worktree", "gitdir")
"""In each linked worktree's directory (`<git dir>/worktrees/NAME`), what points git to the repository's config and
hooks, or holds the worktree's own config: read-only in a confined launch."""

CACHE_DIRS: tuple[str, ...] = (
    ".cache",
    ".npm",
    ".cargo/registry",
    ".cargo/git",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
    ".local/share/uv",
    ".local/share/pnpm",
    ".yarn",
    ".bun/install/cache",
)
"""Toolchain caches under the home (those that exist), so that package managers work under `workspace_write`. Each
is copy-on-write for a confined launch: what a job writes there stays in the sandbox and never reaches the host's
cache, whose files venvs share by hard link and whose code the user runs later (uv's interpreters and tools, npx
packages, crates with build scripts, pre-commit environments)."""

HOME_CACHE = ".cache"
"""The home's own cache (pip's, uv's, most XDG tools'): where the home has none, a `workspace_write` launch makes it
(empty, the user's alone, as the first of those tools to run would), so that it is copy-on-write like the others and
a fresh home's first `uv pip install` works. The other caches are each one tool's: only those that exist are used."""

CREDENTIAL_STORES: tuple[tuple[str, str], ...] = (
    ("~/.ssh", "ssh keys"),
    ("~/.gnupg", "GnuPG keys"),
    ("~/.aws", "AWS credentials"),
    ("~/.azure", "Azure CLI tokens"),
    ("~/.config/gcloud", "Google Cloud credentials"),
    ("~/.kube", "Kubernetes configs and tokens"),
    ("~/.docker", "Docker registry auth"),
    ("~/.netrc", "netrc passwords (curl, git, pip)"),
    ("~/.git-credentials", "git's credential store"),
    ("~/.config/git/credentials", "git's credential store (XDG)"),
    ("~/.config/gh", "GitHub CLI tokens"),
    ("~/.config/hub", "hub tokens"),
    ("~/.config/glab-cli", "GitLab CLI tokens"),
    ("~/.pypirc", "PyPI upload tokens"),
    ("~/.npmrc", "npm tokens"),
    ("~/.yarnrc.yml", "Yarn registry tokens"),
    ("~/.cargo/credentials.toml", "crates.io tokens"),
    ("~/.cargo/credentials", "crates.io tokens (older name)"),
    ("~/.gem/credentials", "RubyGems API keys"),
    ("~/.config/composer/auth.json", "Composer tokens"),
    ("~/.composer/auth.json", "Composer tokens (older place)"),
    ("~/.m2/settings.xml", "Maven server passwords"),
    ("~/.gradle/gradle.properties", "Gradle credentials"),
    ("~/.nuget/NuGet/NuGet.Config", "NuGet feed credentials"),
    ("~/.cache/huggingface/token", "Hugging Face token"),
    ("~/.huggingface/token", "Hugging Face token (older place)"),
    ("~/.kaggle/kaggle.json", "Kaggle API key"),
    ("~/.databrickscfg", "Databricks tokens"),
    ("~/.terraform.d/credentials.tfrc.json", "Terraform Cloud tokens"),
    ("~/.vault-token", "HashiCorp Vault token"),
    ("~/.pgpass", "PostgreSQL passwords"),
    ("~/.my.cnf", "MySQL passwords"),
    ("~/.s3cfg", "s3cmd keys"),
    ("~/.boto", "boto keys"),
    ("~/.config/rclone", "rclone remotes and their keys"),
    ("~/.oci", "Oracle Cloud keys"),
    ("~/.config/doctl", "DigitalOcean tokens"),
    ("~/.password-store", "pass's passwords"),
    ("~/.local/share/keyrings", "the desktop keyring"),
    ("~/.codex", "Codex CLI auth and history"),
    ("~/.claude", "Claude Code credentials and history"),
    ("~/.claude.json", "Claude Code accounts and MCP server tokens"),
    ("~/.gemini", "Gemini CLI credentials"),
    ("~/.config/github-copilot", "GitHub Copilot tokens"),
)
"""Where tools keep credentials in a home, each with whose they are: the default `deny_read`. (eukhe's own agent dir
is always denied, apart from what a session needs; it is not in this list, so no setting can open it.)"""

CREDENTIALS: tuple[str, ...] = tuple(path for path, _ in CREDENTIAL_STORES)
"""The default `deny_read`: the paths of `CREDENTIAL_STORES`."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A sandbox policy: `writable_roots` and `deny_read` as given (the shell expands `~` and resolves them);
    `env_passthrough`: the variables a confined launch gets although they look like secrets (`core.secret_env`)."""

    mode: Mode = Mode.WORKSPACE_WRITE
    network: Network = Network.ON
    writable_roots: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = CREDENTIALS
    env_passthrough: tuple[str, ...] = ()
    allow_domains: tuple[str, ...] = DEFAULT_ALLOWED_NAMES
    deny_domains: tuple[str, ...] = ()
    allow_ports: tuple[int, ...] = DEFAULT_PORTS


@dataclass(frozen=True, slots=True)
class ProjectPolicy:
    """What a project's settings file says of the sandbox (None: not set there)."""

    mode: Mode | None = None
    network: Network | None = None
    writable_roots: tuple[str, ...] | None = None
    deny_read: tuple[str, ...] | None = None
    env_passthrough: tuple[str, ...] | None = None
    allow_domains: tuple[str, ...] | None = None
    deny_domains: tuple[str, ...] | None = None
    allow_ports: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Looser:
    """A project key that would loosen the user's policy: refused by name."""

    key: str
    detail: str


@dataclass(frozen=True, slots=True)
class Tightened:
    """The policy a session starts with, and the project keys refused (any: the user's policy holds whole)."""

    policy: Policy
    refused: tuple[Looser, ...] = ()


def tighten(user: Policy, project: ProjectPolicy | None) -> Tightened:
    """The user's policy made stricter by a project's: a stricter mode, a stricter network (`on` < `allowlist` <
    `off`), more `deny_read`, fewer `env_passthrough` names, fewer allowed domains or ports, more denied domains.
    Anything looser (a looser mode or network, any writable root, a variable the user's `env_passthrough` does not
    name, an allowed domain or port the user's list lacks while the user's network is not `on`, a denied domain or
    `deny_read` path of the user's left out) refuses the project's keys, naming each."""
    if project is None:
        return Tightened(user)
    refused: list[Looser] = []
    mode, network, deny, passthrough = user.mode, user.network, user.deny_read, user.env_passthrough
    allow_domains, deny_domains, allow_ports = user.allow_domains, user.deny_domains, user.allow_ports
    if project.mode is not None:
        if STRICTNESS[project.mode] < STRICTNESS[user.mode]:
            refused.append(Looser("sandbox.mode", f"{project.mode} is looser than the user's {user.mode}"))
        else:
            mode = project.mode
    if project.network is not None:
        if NETWORK_STRICTNESS[project.network] < NETWORK_STRICTNESS[user.network]:
            refused.append(Looser("sandbox.network", f"{project.network} is looser than the user's {user.network}"))
        else:
            network = project.network
    everything = user.network is Network.ON  # then any list is a narrowing of what the user allows
    if project.allow_domains is not None:
        added = [name for name in project.allow_domains if name not in user.allow_domains]
        if added and not everything:
            refused.append(Looser("sandbox.allow_domains", f"it adds {', '.join(added)} to the user's list"))
        else:
            allow_domains = tuple(project.allow_domains)
    if project.allow_ports is not None:
        more = [str(port) for port in project.allow_ports if port not in user.allow_ports]
        if more and not everything:
            refused.append(Looser("sandbox.allow_ports", f"it adds {', '.join(more)} to the user's ports"))
        else:
            allow_ports = tuple(project.allow_ports)
    if project.deny_domains is not None:
        dropped_names = [name for name in user.deny_domains if name not in project.deny_domains]
        if dropped_names:
            refused.append(Looser("sandbox.deny_domains", f"it leaves out the user's {', '.join(dropped_names)}"))
        else:
            deny_domains = tuple(project.deny_domains)
    if project.writable_roots:
        refused.append(Looser("sandbox.writable_roots", "a project cannot add writable roots"))
    if project.deny_read is not None:
        dropped = [path for path in user.deny_read if path not in project.deny_read]
        if dropped:
            refused.append(Looser("sandbox.deny_read", f"it leaves out the user's {', '.join(dropped)}"))
        else:
            deny = tuple(project.deny_read)
    if project.env_passthrough is not None:
        added = [name for name in project.env_passthrough if name not in user.env_passthrough]
        if added:
            refused.append(Looser("sandbox.env_passthrough", f"it adds {', '.join(added)}, which the user's does not"))
        else:
            passthrough = tuple(project.env_passthrough)
    if refused:
        return Tightened(user, tuple(refused))
    return Tightened(
        Policy(mode, network, user.writable_roots, deny, passthrough, allow_domains, deny_domains, allow_ports)
    )


class Kind(enum.IntEnum):
    """What a layer does to the paths below it; at one path, the larger kind wins."""

    READ = 0  # readable, not writable (the root; a carve-out of a denied directory)
    CACHE = 1  # copy-on-write: writable in the sandbox, the host's copy unchanged (a toolchain cache)
    WRITE = 2  # writable (a writable root)
    PIN = 3  # writable, and a mount point of its own, so that it cannot be renamed, removed or replaced (a .git)
    PROTECT = 4  # readable, not writable, although inside a writable root
    DENY = 5  # neither: masked (an empty read-only directory, or /dev/null for a file or socket)


@dataclass(frozen=True, slots=True)
class Layer:
    """One path's rule; `is_dir` says how a denial masks it (an empty directory, or /dev/null); `source` is the
    private directory a cache is bound from, when the sandbox cannot overlay it (None: an overlay)."""

    path: str
    kind: Kind
    is_dir: bool = True
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Cache:
    """A toolchain cache a launch sees copy-on-write: over the host's copy when bwrap can overlay (`private` None),
    else as a private directory of the session's bound in its place (empty at first)."""

    path: str
    private: str | None = None


@dataclass(frozen=True, slots=True)
class Facts:
    """What the shell found for one confined launch: every path real (symlink-free), absolute and existing.

    `cwd`: the working directory; `tmp`: the session's private temp directory, seen as /tmp; `writable`: the extra
    writable roots; `caches`: the toolchain caches, copy-on-write; `denied`: the `deny_read` paths and eukhe's own
    directories, each with whether it is a directory; `readable`: what a session needs of a denied directory (the
    kernel venv, its artifacts); `protected`: the protected paths found below the writable roots (the git ones
    included, see `git_mounts`); `pinned`: the git directories below the writable roots, kept in place; `sockets`:
    Unix sockets outside the writable roots; `own`: eukhe's own directories this launch writes (the kernel's
    snapshot directory), writable in every confined mode; `home`: the user's home (None: it does not exist), which
    stays readable where the host's /tmp holds it; `bridge`: with the network an allowlist, the way to eukhe's
    proxy (None: the launch gets no way out at all)."""

    mode: Mode
    network: Network
    cwd: str
    tmp: str
    writable: tuple[str, ...] = ()
    denied: tuple[tuple[str, bool], ...] = ()
    readable: tuple[str, ...] = ()
    protected: tuple[tuple[str, bool], ...] = ()
    sockets: tuple[str, ...] = ()
    own: tuple[str, ...] = ()
    caches: tuple[Cache, ...] = ()
    pinned: tuple[str, ...] = ()
    home: str | None = None
    bridge: Bridge | None = None


@dataclass(frozen=True, slots=True)
class Bridge:
    """A launch's way to eukhe's proxy: the host directory of its socket (bound read-only at `BRIDGE_DIR`), and the
    interpreter and program of the sandbox's pid 1 (`eukhe.sandbox.netinit`), which listens on `PROXY_PORT` of the
    sandbox's loopback and hands each connection to the proxy."""

    directory: str
    python: str
    program: str


SANDBOX_TMP = "/tmp"


def writable_roots(facts: Facts) -> tuple[str, ...]:
    """The host directories a confined process may write: under `read_only` only eukhe's own (`own`); else also the
    cwd, the private temp directory and the other writable roots."""
    if facts.mode is Mode.READ_ONLY:
        return facts.own
    if facts.mode is not Mode.WORKSPACE_WRITE:
        return ()
    return (facts.cwd, facts.tmp, *facts.writable, *facts.own)


def protected_paths(roots: Sequence[str], present: frozenset[str]) -> tuple[str, ...]:
    """The protected paths directly below each writable root that the shell found (`present`: the real paths that
    exist), for a mount plan: `ROOT/.git/hooks`, `ROOT/.git/config.worktree`, ..., `ROOT/.eukhe`, `ROOT/.agents`,
    `ROOT/.claude`."""
    found = []
    for root in roots:
        for names in PROTECTED_NAMES:
            path = normalize(root + "/" + "/".join(names))
            if path in present and path not in found:
                found.append(path)
    return tuple(found)


def dirs_to_make(roots: Sequence[str], present: frozenset[str]) -> tuple[str, ...]:
    """The protected directories a launch makes (empty) below each writable root where nothing is there yet, so
    that they can be mounted read-only and no job can create them: `ROOT/.eukhe`, `ROOT/.agents`, `ROOT/.claude`."""
    return tuple(
        dict.fromkeys(
            path for root in roots for name in PROTECTED_DIRS if (path := normalize(root + "/" + name)) not in present
        )
    )


@dataclass(frozen=True, slots=True)
class GitDirFound:
    """A git directory the shell found below a writable root (its real path), the names of `GITDIR_PROTECTED` that
    exist in it, and each of its linked worktrees' directories with the names of `WORKTREE_PROTECTED` found there."""

    path: str
    present: frozenset[str] = frozenset()
    worktrees: tuple[tuple[str, frozenset[str]], ...] = ()


@dataclass(frozen=True, slots=True)
class GitMounts:
    """What a launch does for the git directories below its writable roots: `pinned` ones stay where they are (a
    mount point cannot be renamed or removed, so `.git` cannot be swapped for one the job wrote), and what git reads
    its config and hooks from is `protected` (path, is a directory)."""

    pinned: tuple[str, ...] = ()
    protected: tuple[tuple[str, bool], ...] = ()
    to_make: tuple[str, ...] = ()
    """The `hooks` directories to make first, in git directories that have none (git makes them at `git init`, so
    a job could make one and plant a hook in it)."""


def git_mounts(gitfiles: Sequence[str], found: Sequence[GitDirFound]) -> GitMounts:
    """The pins and protections for what the shell found: each `.git` that is a file (a worktree's or a
    submodule's pointer to its git directory) is protected; each git directory and each linked worktree's
    directory is pinned, with the names of `GITDIR_PROTECTED` and `WORKTREE_PROTECTED` in them protected."""
    pinned: list[str] = []
    protected: list[tuple[str, bool]] = [(path, False) for path in gitfiles]
    for gitdir in found:
        pinned.append(gitdir.path)
        protected += [
            (gitdir.path + "/" + name, name == "hooks") for name in GITDIR_PROTECTED if name in gitdir.present
        ]
        for worktree, present in gitdir.worktrees:
            pinned.append(worktree)
            protected += [(worktree + "/" + name, False) for name in WORKTREE_PROTECTED if name in present]
    to_make = tuple(f"{gitdir.path}/hooks" for gitdir in found if "hooks" not in gitdir.present)
    return GitMounts(tuple(dict.fromkeys(pinned)), tuple(dict.fromkeys(protected)), to_make)


def sockets_to_mask(
    bound: Sequence[str], open_roots: Sequence[str], denied: Sequence[str], home: str | None = None
) -> tuple[str, ...]:
    """Of the Unix sockets bound on the machine (real paths), those a launch masks: every one but those the private
    /tmp hides (not those in a `home` that lies there: it is shown), those in a writable root (the user's own, or
    allowed there), and those a denied path covers."""

    def hidden(path: str) -> bool:
        return is_within(path, SANDBOX_TMP) and not (home is not None and home_shown(home) and is_within(path, home))

    return tuple(
        path for path in bound if not (hidden(path) or any(is_within(path, root) for root in (*open_roots, *denied)))
    )


def home_shown(home: str) -> bool:
    """Whether a home lies in the host's /tmp (below it, not /tmp itself, where the private /tmp must be), so that a
    launch shows it there: a home is readable wherever it is, as the root is."""
    return home != SANDBOX_TMP and is_within(home, SANDBOX_TMP)


def composition(policy: Policy, user_transport: bool) -> str | None:
    """Why a policy cannot hold with the user's own kernel transport, if it cannot: eukhe runs that transport as it
    is, so it cannot cut that kernel's network."""
    if user_transport and policy.mode is not Mode.OFF and policy.network is not Network.ON:
        return "network_off_with_a_user_transport"
    return None


def chosen(policy: Policy, mode: Mode | None, network: Network | None, allow_domains: Sequence[str] = ()) -> Policy:
    """The settings files' policy with the mode or network chosen at a session's creation over it, and more allowed
    domains (the user's own choice, which may loosen it)."""
    allowed = tuple(dict.fromkeys((*policy.allow_domains, *allow_domains)))
    return replace(policy, mode=mode or policy.mode, network=network or policy.network, allow_domains=allowed)


def layers(facts: Facts) -> tuple[Layer, ...]:
    """Every layer of a launch, shallow first; at one path, by kind (so a later layer always decides). A cache is
    copy-on-write under `workspace_write` only; a pin is kept only where a writable layer holds it. A home that
    only the host's /tmp would hide is readable, as it would be anywhere else (its caches and denied paths, deeper,
    still decide for themselves); one a writable root or a denied path holds stays as that decides. A denial beats
    that grant too: one at the home or above it (up to /tmp itself) keeps it masked, although the plan has no layer
    for it (the mask of /tmp does the same there). A denial of /tmp itself is that mask: the private /tmp."""
    hidden = Layer(SANDBOX_TMP, Kind.DENY)  # the host's /tmp: the private one shows there
    found = [Layer("/", Kind.READ), hidden]
    found += [Layer(path, Kind.WRITE) for path in writable_roots(facts)]
    if facts.mode is Mode.READ_ONLY:  # the working directory shows wherever it lies (under /tmp, in a child's copy)
        found.append(Layer(facts.cwd, Kind.READ))
    if facts.mode is Mode.WORKSPACE_WRITE:
        found += [Layer(cache.path, Kind.CACHE, source=cache.private) for cache in facts.caches]
    found += [Layer(path, Kind.READ) for path in facts.readable]
    found += [Layer(path, Kind.PIN) for path in facts.pinned]
    found += [Layer(path, Kind.PROTECT, is_dir) for path, is_dir in facts.protected]
    masks = [Layer(path, Kind.DENY, is_dir) for path, is_dir in facts.denied]
    masks += [Layer(path, Kind.DENY, False) for path in facts.sockets]
    found += [hidden if mask.path == SANDBOX_TMP else mask for mask in masks]  # /tmp's mask is the private /tmp
    plan = _plan(found)
    home = facts.home
    if (
        home is not None
        and home_shown(home)
        and deciding(plan, home) == hidden
        and not any(is_within(home, mask.path) for mask in masks)  # the plan drops those the mask of /tmp covers
    ):
        plan = _plan([*found, Layer(home, Kind.READ)])
    return plan


def _plan(found: Sequence[Layer]) -> tuple[Layer, ...]:
    """The layers of `found` in mount order, without those that would change nothing."""
    unique = {(layer.path, layer.kind): layer for layer in found}
    ordered = sorted(unique.values(), key=lambda layer: (len(split(layer.path)), layer.path, layer.kind))
    kept: list[Layer] = []
    for layer in ordered:
        if layer.path == SANDBOX_TMP and layer.kind is not Kind.DENY:
            continue  # the private /tmp is mounted there: nothing of the host's can be
        holder = deciding(kept, layer.path) if kept else None
        if layer.kind is Kind.PIN and (holder is None or holder.kind not in (Kind.WRITE, Kind.PIN)):
            continue  # only what a confined process may write needs keeping in place
        if holder is not None and EFFECT[holder.kind] == EFFECT[layer.kind]:
            continue  # what holds it already does the same: a mount more would change nothing
        kept.append(layer)
    return tuple(kept)


EFFECT = {
    Kind.READ: "read-only",
    Kind.CACHE: "copy-on-write",
    Kind.WRITE: "writable",
    Kind.PIN: "pinned",  # never the same as what holds it: each pin is a mount of its own
    Kind.PROTECT: "read-only",
    Kind.DENY: "masked",
}


def deciding(all_layers: Sequence[Layer], path: str) -> Layer:
    """The layer that decides for `path`: the deepest holding it; at one path, the largest kind."""
    best = all_layers[0]
    for layer in all_layers:
        if is_within(path, layer.path):
            best = layer  # layers are sorted: a later holder is deeper, or the same path with a larger kind
    return best


def tmp_mount_points(all_layers: Sequence[Layer]) -> tuple[Layer, ...]:
    """The layers mounted where the private /tmp holds them (the host's /tmp is not there): each needs its mount
    point made in the private /tmp first. A layer inside another one (the cwd in a home shown under /tmp) has its
    mount point on the host already."""
    found = []
    for index, layer in enumerate(all_layers):
        if layer.path == SANDBOX_TMP or not is_within(layer.path, SANDBOX_TMP):
            continue
        holder = deciding(all_layers[:index], layer.path)
        if holder.path == SANDBOX_TMP and holder.kind is Kind.DENY:
            found.append(layer)
    return tuple(found)


class Want(enum.Enum):
    """What a file tool is about to do with a path."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Allowed:
    """The file tool may act."""


@dataclass(frozen=True, slots=True)
class Denied:
    """The file tool is refused (`reason: sandbox`): `rule` names which (`deny_read`, `private_tmp`, `read_only`,
    `outside_writable_roots`, `protected`, `cache`), `root` the path that rule is about."""

    rule: str
    root: str

    def message(self, path: str, want: Want) -> str:
        """A sentence for the caller: the path, the rule, and the way on."""
        if self.rule == "deny_read":
            return f"{path} is under {self.root}, which the sandbox policy denies (deny_read)"
        if self.rule == "private_tmp":
            return (
                f"{path} is in the host's /tmp, which the sandbox hides: a confined process's /tmp is the session's "
                f"own {self.root}; use a path in the working directory"
            )
        if self.rule == "read_only":
            return f"cannot write {path}: the sandbox is read_only"
        if self.rule == "protected":
            return (
                f"cannot write {path}: {self.root} is protected inside the writable roots (it could loosen the next "
                "session, offer the next model a planted skill, or run code on your next git command); change it "
                "outside eukhe"
            )
        if self.rule == "cache":
            return (
                f"cannot write {path}: {self.root} is a toolchain cache, which confined commands see copy-on-write "
                "(their writes stay in their sandbox); the file tools do not change it"
            )
        return f"cannot {want.value} {path}: it is outside the writable roots (add it to sandbox.writable_roots)"


ALLOWED = Allowed()


def access(facts: Facts, path: str, want: Want) -> Allowed | Denied:
    """The file tools' verdict on a resolved host path: what a confined process could do there, plus the protected
    names anywhere below a writable root. `off` allows everything."""
    if facts.mode is Mode.OFF:
        return ALLOWED
    layer = deciding(layers(facts), path)
    if layer.path == SANDBOX_TMP and layer.kind is Kind.DENY:
        return Denied("private_tmp", facts.tmp)
    if layer.kind is Kind.DENY:
        return Denied("deny_read", layer.path)
    if want is Want.READ:
        return ALLOWED
    if facts.mode is Mode.READ_ONLY:
        return Denied("read_only", "/")
    if layer.kind is Kind.PROTECT:
        return Denied("protected", layer.path)
    if layer.kind is Kind.CACHE:
        return Denied("cache", layer.path)
    if layer.kind not in (Kind.WRITE, Kind.PIN):
        return Denied("outside_writable_roots", path)
    named = _protected_below(layer.path, path)
    return ALLOWED if named is None else Denied("protected", named)


def _protected_below(root: str, path: str) -> str | None:
    """The protected path on the way from a writable `root` down to `path`, if one is."""
    rest = split(path[len(root) :]) if root != "/" else split(path)
    for start in range(len(rest)):
        for names in PROTECTED_NAMES:
            if tuple(rest[start : start + len(names)]) == names:
                return normalize(root + "/" + "/".join(rest[: start + len(names)]))
    return None


def bwrap_argv(facts: Facts, command: Sequence[str], *, info_fd: int | None = None) -> tuple[str, ...]:
    """The bubblewrap arguments (without the program) that run `command` confined by `facts`."""
    argv: list[str] = []
    masks: list[str] = []  # made read-only last: a deeper mount inside a mask needs its mount point made first
    for layer in layers(facts):
        if layer.path == "/":
            argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
            argv += ["--bind" if facts.mode is not Mode.OFF else "--ro-bind", facts.tmp, SANDBOX_TMP]
        elif layer.path in (facts.tmp, SANDBOX_TMP):
            continue  # the private temp directory is the sandbox's /tmp (bound with the root), hiding the host's
        elif layer.kind in (Kind.WRITE, Kind.PIN):
            argv += ["--bind", layer.path, layer.path]
        elif layer.kind is Kind.CACHE and layer.source is None:
            argv += ["--overlay-src", layer.path, "--tmp-overlay", layer.path]
        elif layer.kind is Kind.CACHE and layer.source is not None:
            argv += ["--bind", layer.source, layer.path]
        elif layer.kind in (Kind.READ, Kind.PROTECT):
            argv += ["--ro-bind", layer.path, layer.path]
        elif layer.is_dir:
            argv += ["--tmpfs", layer.path]
            masks.append(layer.path)
        else:
            argv += ["--ro-bind", "/dev/null", layer.path]
    for path in masks:
        argv += ["--remount-ro", path]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if facts.network is not Network.ON:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += ["--setenv", "TMPDIR", SANDBOX_TMP, "--chdir", facts.cwd]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    bridge = facts.bridge if facts.network is Network.ALLOWLIST and facts.mode is not Mode.OFF else None
    if bridge is None:
        return (*argv, "--", *command)
    argv += ["--ro-bind", bridge.directory, BRIDGE_DIR, "--as-pid-1"]
    for name, value in PROXY_ENV:
        argv += ["--setenv", name, value]
    init = (bridge.python, "-I", "-S", "-c", bridge.program, str(PROXY_PORT), f"{BRIDGE_DIR}/{BRIDGE_SOCKET}")
    return (*argv, "--", *init, "--", *command)
