"""Real sandboxes for the Wrapped transport's tests: a bind-mounted sandbox dir, bubblewrap, and an sshd on
127.0.0.1 with its own host key, authorized key and port (no mocks of the operating system)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.real.tools import need_tools, tool

SANDBOX_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys._base_executable
"""A Python without eukhe: the stub reaches it over stdin."""
BOOT_MARKER = "eukhe_kernel.runtime as runtime"
"""In the command line of every wrapped kernel (its boot program)."""


def need_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (this suite's CI runs as root)")


@contextlib.contextmanager
def bind_mount(host: Path, at: Path) -> Iterator[Path]:
    """`host` also visible at `at` (a sandbox path on this machine), for as long as the block runs."""
    need_root("a bind mount")
    need_tools("mount", "umount")
    at.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(host), str(at)], check=True)
    try:
        yield at
    finally:
        subprocess.run(["umount", "-l", str(at)], check=False)


def wrapped_kernels() -> list[int]:
    """Live processes running a wrapped kernel's boot program."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if BOOT_MARKER in cmdline and state != "Z":
            found.append(int(entry))
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Sshd:
    """A running sshd on 127.0.0.1 and the argv prefix that reaches it as root."""

    port: int
    key: Path

    @property
    def argv_prefix(self) -> list[str]:
        return [
            "ssh",
            "-T",
            "-i",
            str(self.key),
            "-p",
            str(self.port),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "BatchMode=yes",
            "root@127.0.0.1",
        ]


@contextlib.contextmanager
def sshd(directory: Path) -> Iterator[Sshd]:
    """An sshd of its own (host key, authorized key, port) for as long as the block runs."""
    need_root("an sshd on 127.0.0.1")
    need_tools("sshd", "ssh", "ssh-keygen")
    binary = tool("sshd")
    assert binary is not None
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / name)], check=True)
    authorized = directory / "authorized_keys"
    authorized.write_text((directory / "client_key.pub").read_text())
    authorized.chmod(0o600)
    port = free_port()
    config = directory / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {directory / 'host_key'}\n"
        f"AuthorizedKeysFile {authorized}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        f"KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile {directory / 'sshd.pid'}\n"
        "LogLevel ERROR\n"
    )
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:  # bounded wait for a real event: the port accepting connections
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert server.poll() is None, server.stderr.read() if server.stderr else b""
            assert time.monotonic() < deadline, "sshd did not listen"
            time.sleep(0.05)
        yield Sshd(port, directory / "client_key")
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stderr is not None:
            server.stderr.close()


@contextlib.contextmanager
def wrapper(kind: str, tmp_path: Path, host: Path) -> Iterator[tuple[dict[str, Any], str]]:
    """The `kernel_transport` setting of one real wrapper, and the sandbox path of `host`."""
    need_root(f"the {kind} wrapper")
    if kind == "setsid":
        need_tools("setsid")
        with bind_mount(host, tmp_path / "sandbox") as sandbox:
            prefix = ["setsid", "-w", "sh", "-c", 'exec "$@"', "sh"]
            yield {"argv_prefix": prefix, "path_map": [{"sandbox": str(sandbox), "host": str(host)}]}, str(sandbox)
    elif kind == "bwrap":
        need_tools("bwrap")
        prefix = ["bwrap", "--ro-bind", "/", "/", "--bind", str(host), "/work", "--dev", "/dev", "--proc", "/proc"]
        prefix += ["--tmpfs", "/tmp", "--clearenv", "--die-with-parent"]
        yield {"argv_prefix": prefix, "path_map": [{"sandbox": "/work", "host": str(host)}]}, "/work"
    else:
        with sshd(tmp_path / "sshd") as server, bind_mount(host, tmp_path / "remote") as sandbox:
            setting = {"argv_prefix": server.argv_prefix, "command": "shell"}
            yield {**setting, "path_map": [{"sandbox": str(sandbox), "host": str(host)}]}, str(sandbox)
