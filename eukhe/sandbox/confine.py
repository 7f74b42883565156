"""A session's confinement: its policy, the probed bwrap, its private /tmp, and the two things every path asks of
it: `wrap` (the argv of a confined launch) and `check` (the file tools' verdict, before they act)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from eukhe.core import allowlist
from eukhe.core import limits as limit_rules
from eukhe.core import sandbox as core
from eukhe.core.secret_env import launch_environment
from eukhe.errors import EukheError
from eukhe.records.network import NetworkAttempt
from eukhe.records.sandbox import SandboxChoice, SandboxPolicy
from eukhe.records.settings import KernelTransport
from eukhe.sandbox.bwrap import Bubblewrap, available
from eukhe.sandbox.facts import (
    ensure_dir,
    eukhe_dirs,
    find_git,
    gather,
    make_home_cache,
    make_private_dirs,
    prepare,
)
from eukhe.sandbox.gitguard import GitGuard
from eukhe.sandbox.limits import SessionLimits
from eukhe.sandbox.netproxy import LOG_NAME, NetProxy, read_log

TMP_NAME = "tmp"
"""The session's private temp directory, in its own directory: a confined process sees it as /tmp."""
CACHES_NAME = "caches"
"""The session's private toolchain caches, in its own directory, where bwrap cannot overlay the host's."""
GIT_BASELINE_NAME = "git-baseline.json"
"""The git config files as they were before the session's first confined launch, in its own directory: what the git
guard keeps (a reopened session keeps the same)."""


class SandboxConflictError(EukheError):
    """A sandbox policy that cannot hold with the other settings."""

    code = "sandbox_conflict"


def choose(policy: SandboxPolicy, choice: SandboxChoice | None) -> SandboxPolicy:
    """The settings files' policy with the mode or network chosen at creation over it (`core.chosen`)."""
    if choice is None:
        return policy
    mode = None if choice.mode is None else core.Mode(choice.mode)
    network = None if choice.network is None else core.Network(choice.network)
    return SandboxPolicy.of(core.chosen(policy.to_core(), mode, network, choice.allow_domains or ()))


def check_composition(policy: SandboxPolicy, transport: KernelTransport | None) -> None:
    """A user's `kernel_transport` is its own confinement: eukhe runs it as it is (bwrap around a `docker exec` or
    an `ssh` would confine the client, not the kernel). So a policy with the network off cannot hold for that
    kernel, and is refused rather than half kept."""
    if core.composition(policy.to_core(), transport is not None) is not None:
        assert transport is not None
        raise SandboxConflictError(
            f"sandbox.network is {policy.network}, but the kernel runs under the user's kernel_transport "
            f"({transport.argv_prefix[0]} ...), whose network eukhe cannot cut: cut it in the transport and set "
            "network on, or unset kernel_transport so that the kernel runs in eukhe's sandbox"
        )


class Confinement:
    """One session's sandbox. `start()` probes bwrap (SandboxUnavailableError when confinement does not work);
    with mode `off` nothing is probed and nothing is confined."""

    def __init__(
        self,
        policy: SandboxPolicy,
        *,
        cwd: Path,
        session_dir: Path,
        readable: Sequence[Path] = (),
        hidden: Sequence[str] = (),
        limits: limit_rules.Settings | None = None,
    ) -> None:
        self.policy = policy
        self.limits = SessionLimits(limits or limit_rules.Settings(), session_dir, session_dir / TMP_NAME)
        """The session's resource limits: its control groups and rlimits, which every confined launch joins, and the
        tmpfs its private /tmp is (mounted at `start`, before the first launch, where eukhe may)."""
        self.rules = policy.to_core()
        self.cwd = cwd
        self.tmp = session_dir / TMP_NAME
        self.caches = session_dir / CACHES_NAME
        self.readable = [str(path) for path in readable]
        self.hidden = list(hidden)
        self.bwrap: Bubblewrap | None = None
        self.git = GitGuard(session_dir / GIT_BASELINE_NAME)
        self.net_log = session_dir / LOG_NAME
        self.net: NetProxy | None = None
        """With the network an allowlist, the session's proxy (started with the sandbox)."""

    @property
    def confined(self) -> bool:
        return self.rules.mode is not core.Mode.OFF

    def start(self) -> None:
        """Probe bwrap and make the private /tmp; a policy that is off does neither."""
        if not self.confined:
            return
        self.bwrap = available()
        ensure_dir(self.tmp)
        if self.rules.network is core.Network.ALLOWLIST and self.net is None:
            found = allowlist.rules(self.rules.allow_domains, self.rules.deny_domains, self.rules.allow_ports)
            self.net = NetProxy(found, self.net_log)
            self.net.start()
        self.limits.start()

    def moved(self, session_dir: Path, *, readable: Sequence[Path]) -> Confinement:
        """The same confinement for the session's new directory (a fork continues in it)."""
        moved = Confinement(self.policy, cwd=self.cwd, session_dir=session_dir, readable=readable, hidden=self.hidden)
        moved.git = self.git  # the same watch goes on, with the same baseline
        moved.limits = self.limits  # and the same groups hold its processes
        moved.git.keep(session_dir / GIT_BASELINE_NAME)
        moved.net = self.net  # the same proxy goes on, recording into the new directory
        if moved.net is not None:
            moved.net.log_path = moved.net_log
        if self.bwrap is not None:
            moved.start()
            # The new directory's /tmp gets its own tmpfs (empty, as a fork's /tmp starts); the old one's content is
            # kept in the old directory. Jobs that go on in the fork keep the old tmpfs they were started with.
            moved.limits.move_tmp(moved.tmp)
        else:
            moved.limits.tmp = moved.tmp
        return moved

    def hide(self, path: str) -> None:
        """One more of eukhe's own paths no confined process sees (a worker's socket directory)."""
        if path not in self.hidden:
            self.hidden.append(path)

    def environment(self, host: Mapping[str, str], *, held: Collection[str] = ()) -> dict[str, str]:
        """What a launch gets of the host's environment `host`: confined, no variable that looks like a secret
        (`held`: more names that hold one) unless `env_passthrough` names it; never eukhe's own secrets."""
        return launch_environment(host, confined=self.confined, passthrough=self.rules.env_passthrough, held=held)

    def facts(self, *, sockets: bool = True, readable: Sequence[str] = (), writable: Sequence[str] = ()) -> core.Facts:
        """What a launch or a check reads off the disk now (`sockets`: also the Unix sockets to mask)."""
        overlays = self.bwrap is None or self.bwrap.overlays
        bridge = None
        if self.net is not None:
            bridge = core.Bridge(self.net.directory, init_python(), init_program())
            readable = [*readable, os.path.dirname(os.path.dirname(bridge.python))]
        found = gather(
            self.rules.mode,
            self.rules.network,
            cwd=str(self.cwd),
            tmp=str(self.tmp),
            writable_roots=self.rules.writable_roots,
            deny_read=self.rules.deny_read,
            hidden=[*eukhe_dirs(), *self.hidden],
            readable=[*self.readable, *readable],
            sockets=None if sockets else (),
            own=writable,
            private_caches=None if overlays else str(self.caches),
        )
        return found if bridge is None else dataclasses.replace(found, bridge=bridge)

    def wrap(
        self,
        command: Sequence[str],
        *,
        info_fd: int | None = None,
        readable: Sequence[str] = (),
        writable: Sequence[str] = (),
    ) -> list[str]:
        """The argv that runs `command` confined (as it is when the policy is off); `readable` and `writable`: more
        of eukhe's own paths this launch needs (the kernel's interpreter, its snapshot directory), `writable` ones
        writable in every confined mode."""
        if not self.confined:
            return list(command)
        if self.bwrap is None:
            self.start()
        assert self.bwrap is not None
        if self.rules.mode is core.Mode.WORKSPACE_WRITE:
            make_home_cache()
            roots = [os.path.realpath(self.cwd), *self.facts(sockets=False).writable]
            prepare(roots)
            _, found = find_git(roots)
            self.git.watch(roots, found)
            self.git.audit()
        facts = self.facts(readable=readable, writable=writable)
        self._make_mount_points(facts)
        return [*self.limits.prelude(), self.bwrap.path, *core.bwrap_argv(facts, command, info_fd=info_fd)]

    def notices(self) -> list[str]:
        """What the sandbox undid since the last call (after an audit of the git state now)."""
        if self.rules.mode is not core.Mode.WORKSPACE_WRITE or self.bwrap is None:
            return []
        self.git.audit()
        return self.git.take_notices()

    def close(self) -> None:
        """Stop watching, the proxy, end what is left in the session's control groups, and release the private
        /tmp's tmpfs, its content kept in the directory (the session closes)."""
        self.git.close()
        self.limits.close()
        if self.net is not None:
            self.net.close()
            self.net = None

    def network_refused(self) -> list[NetworkAttempt]:
        """The connections the proxy refused since the last call (none without one)."""
        return [] if self.net is None else self.net.take_refused()

    def network_attempts(self) -> list[NetworkAttempt]:
        """Every connection attempt the session's proxy recorded, oldest first."""
        return read_log(self.net_log)

    def _make_mount_points(self, facts: core.Facts) -> None:
        """The paths under /tmp that a launch mounts where the private /tmp holds them need a mount point there:
        made here, private (bwrap would make them with its own modes), before bwrap runs; and so do the private
        caches."""
        for cache in facts.caches:
            if cache.private is not None:
                with contextlib.suppress(OSError):  # bwrap then says what is wrong
                    make_private_dirs(Path(cache.private))
        for layer in core.tmp_mount_points(core.layers(facts)):
            if layer.path == facts.tmp:
                continue
            point = self.tmp / os.path.relpath(layer.path, core.SANDBOX_TMP)
            with contextlib.suppress(OSError):  # bwrap then says what is wrong
                if layer.is_dir:
                    make_private_dirs(point)
                elif not os.path.lexists(point):
                    make_private_dirs(point.parent)
                    os.close(os.open(point, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def init_python() -> str:
    """The interpreter of a sandbox's pid 1 (`eukhe.sandbox.netinit`): the host's own, by its real path (run with
    `-I -S`: its standard library only)."""
    return os.path.realpath(sys.executable)


@functools.cache
def init_program() -> str:
    """The program of a sandbox's pid 1, passed with `-c` (nothing of eukhe's need be readable in the sandbox)."""
    return Path(__file__).with_name("netinit.py").read_text(encoding="utf-8")
