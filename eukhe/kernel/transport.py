"""The Wrapped transport (S3 "Where the sandbox runs" 2-8): the same stub, run under a wrapper argv (docker exec,
podman, bwrap, ssh, kubectl exec), its frames carried over the wrapper's stdin and stdout.

- The sandbox needs only a Python: the host sends the stub it was built with over the wrapper's stdin, before the
  first request, and a tiny boot program (`python -c BOOT`) loads it from there. Nothing is installed in the
  sandbox, and the sandbox never runs a stub of another version than the host's.
- The kernel's environment is not the host's: the sandbox's own, plus the kernel's entries, the host variables
  named in `env`, and `EUKHE_KERNEL_OWNER=stdin` (the stub then leads its own process group and ends at stdin EOF).
  An entry holding a host path gets its sandbox path, or is left out with a diagnostic.
- The kernel starts in the sandbox path of the session's cwd; a cwd outside every mount stops the start with an
  error that names the cwd and the mounts.
- The wrapper process itself keeps the host's environment (docker and ssh need it), and with `command: "shell"`
  the kernel command goes as one shell-quoted string (ssh hands it to the remote shell).
"""

from __future__ import annotations

import io
import json
import os
import shlex
import zipfile
from functools import cache
from pathlib import Path

from eukhe.core import pathmap
from eukhe.errors import EukheError
from eukhe.kernel.launch import KernelLaunch, in_front, skills_environment
from eukhe.records.settings import KernelTransport
from eukhe_kernel.snapshot import SNAPSHOT_VARIABLE

OWNER_VARIABLE = "EUKHE_KERNEL_OWNER"
HOST_PATH_VARIABLES = ("EUKHE_CODING_AGENT_DIR", "EUKHE_BASH_SHELL")
"""Kernel entries that hold a host path: mapped to their sandbox path, or left out."""

BOOT = """\
import json, os, sys, tempfile
def take(n):
    got = b""
    while len(got) < n:
        more = os.read(0, n - len(got))
        if not more:
            sys.exit("eukhe: the host closed stdin before the kernel stub arrived")
        got += more
    return got
head = take(20)
meta = json.loads(take(int(head[:10])))
stub = take(int(head[10:]))
home = tempfile.mkdtemp(prefix="eukhe-stub-")
path = os.path.join(home, "eukhe_kernel.zip")
with open(path, "wb") as out:
    out.write(stub)
sys.path.insert(0, path)
os.environ.update(meta["env"])
os.chdir(meta["cwd"])
import eukhe_kernel.runtime as runtime
from eukhe_kernel.main import main
for name in meta["modules"]:
    __import__(name)
os.remove(path)
os.rmdir(home)
main()
"""
"""The boot program a wrapped kernel starts with: it reads the stub (a zip) and its settings from stdin, exactly
(os.read, never a buffered read that would take the protocol's bytes), loads every stub module, removes the zip,
then runs the stub on the same stdin and stdout."""


class TransportError(EukheError):
    """A wrapped kernel cannot start: its settings do not fit the session (a cwd outside every mount)."""

    code = "kernel_start_failed"


@cache
def stub_archive() -> tuple[bytes, tuple[str, ...]]:
    """The `eukhe_kernel` package as a zip (made once per process), and the names of its modules."""
    package = Path(__file__).resolve().parents[2] / "eukhe_kernel"
    buffer = io.BytesIO()
    modules: list[str] = []
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*.py")):
            relative = path.relative_to(package.parent)
            archive.write(path, relative.as_posix())
            parts = relative.with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if not name.endswith("__main__"):
                modules.append(name)
    return buffer.getvalue(), tuple(modules)


def path_map_of(transport: KernelTransport) -> pathmap.PathMap:
    """The transport's mounts as the core's path map."""
    return pathmap.PathMap(tuple(pathmap.Mount(mount.sandbox, mount.host) for mount in transport.path_map))


def sandbox_cwd(transport: KernelTransport, cwd: Path) -> str:
    """The sandbox path of the session's cwd; TransportError naming the cwd and the mounts when no mount holds it."""
    mapped = path_map_of(transport).sandbox_of(str(cwd))
    if isinstance(mapped, pathmap.Outside):
        mounts = ", ".join(f"{m.host} -> {m.sandbox}" for m in transport.path_map) or "none"
        raise TransportError(
            f"the session's working directory {cwd} is outside every mount of the kernel transport "
            f"(mounts: {mounts}); add a path_map entry that holds it"
        )
    return mapped


def kernel_environment(transport: KernelTransport, host: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The wrapped kernel's own entries, the named host variables and the owner rule; with the diagnostics of the
    entries left out (a host path no mount holds, a named variable the host does not have)."""
    mounts = path_map_of(transport)
    env: dict[str, str] = {OWNER_VARIABLE: "stdin"}
    diagnostics: list[str] = []
    for name in transport.env:
        if name in host:
            env[name] = host[name]
        else:
            diagnostics.append(f"kernel_transport.env names {name}, which the host does not set: left out")
    for name in HOST_PATH_VARIABLES:
        if name not in host:
            continue
        mapped = mounts.sandbox_of(host[name])
        if isinstance(mapped, pathmap.Outside):
            env.pop(name, None)
            diagnostics.append(f"{name}={host[name]} is a host path outside every mount: left out of the kernel's env")
        else:
            env[name] = mapped
    return env, diagnostics


def snapshot_entry(transport: KernelTransport, snapshot: str | None) -> tuple[dict[str, str], list[str]]:
    """The kernel's entry for the namespace snapshot file (host path `snapshot`): its sandbox path, or none and a
    diagnostic when no mount holds it (the host then asks for no snapshot; S3 sandbox 6)."""
    if snapshot is None:
        return {}, []
    mapped = path_map_of(transport).sandbox_of(snapshot)
    if isinstance(mapped, pathmap.Outside):
        diagnostic = (
            f"the namespace snapshot file {snapshot} is outside every mount of the kernel transport: this kernel "
            "takes no snapshot, so idle culling loses its variables"
        )
        return {}, [diagnostic]
    return {SNAPSHOT_VARIABLE: mapped}, []


def skills_entry(transport: KernelTransport, cwd: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """The wrapped kernel's skills: their listing with sandbox paths, each Python skill's sandbox import path (in
    front of its PYTHONPATH), and a diagnostic for each one no mount holds (left out)."""
    mounts = path_map_of(transport)

    def mapped(path: str) -> str | None:
        found = mounts.sandbox_of(path)
        return None if isinstance(found, pathmap.Outside) else found

    try:
        return skills_environment(cwd, mapped)
    except (EukheError, OSError) as error:
        return {}, [], [f"the skills of {cwd} could not be read: {error}"]


def wrapped_launch(transport: KernelTransport, cwd: Path, snapshot: str | None = None) -> KernelLaunch:
    """The launch of a wrapped kernel for a session in `cwd` (`snapshot`: the host path of its namespace snapshot
    file): the wrapper argv, the host's environment for the wrapper, and the stub with its settings as the stdin
    preamble."""
    start = sandbox_cwd(transport, cwd)
    env, diagnostics = kernel_environment(transport, dict(os.environ))
    snapshot_env, snapshot_diagnostics = snapshot_entry(transport, snapshot)
    env.update(snapshot_env)
    diagnostics += snapshot_diagnostics
    skills_env, skill_paths, skills_diagnostics = skills_entry(transport, cwd)
    env.update(skills_env)
    if skill_paths:
        env["PYTHONPATH"] = in_front(skill_paths, env.get("PYTHONPATH"))
    diagnostics += skills_diagnostics
    stub, modules = stub_archive()
    meta = json.dumps({"env": env, "cwd": start, "modules": list(modules)}).encode()
    preamble = f"{len(meta):010d}{len(stub):010d}".encode() + meta + stub
    command = [transport.python, "-c", BOOT]
    argv = [*transport.argv_prefix, *([shlex.join(command)] if transport.command == "shell" else command)]
    return KernelLaunch(
        tuple(argv),
        dict(os.environ),
        preamble=preamble,
        cwd=None,
        diagnostics=tuple(diagnostics),
        snapshot=bool(snapshot_env),
        host_pids=False,
    )
