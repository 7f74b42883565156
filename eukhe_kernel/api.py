"""What cells call: `display`, `bash`, `bash_background`, `host_request` (the kernel's side of the protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from typing import Any

from eukhe_kernel.pictures import bundle_of
from eukhe_kernel.runtime import HostRequestError, running_kernel

__all__ = [
    "HostRequestError",
    "bash",
    "bash_background",
    "display",
    "host_request",
    "host_request_sync",
    "running_kernel",
]


def display(obj: Any) -> None:
    """Show `obj` as a display frame: its repr and its rich representations (an image, Markdown, HTML; a
    matplotlib figure as PNG)."""
    running_kernel().display(bundle_of(obj))


async def host_request(kind: str, params: Any = None, *, request_id: str | None = None) -> Any:
    """Ask the host to serve request `kind`; returns the handler's result or raises HostRequestError."""
    future = running_kernel().host_request(kind, params, request_id=request_id)
    return await asyncio.wrap_future(future)


def host_request_sync(kind: str, params: Any = None, *, timeout: float | None = None) -> Any:
    """The blocking form of host_request, for synchronous code (the reply is read on the reader thread)."""
    return running_kernel().host_request(kind, params).result(timeout)


def bash(command: str, *, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run `command` with bash in its own process group; returns its combined output (the group dies at shutdown)."""
    kernel = running_kernel()
    with subprocess.Popen(
        ["bash", "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="surrogateescape",
        start_new_session=True,
    ) as process:
        kernel.child_started(process)
        try:
            output, _ = process.communicate(timeout=timeout)
        except BaseException:
            _kill_group(process.pid)
            process.wait()
            raise
        finally:
            kernel.child_ended(process)
    return subprocess.CompletedProcess(["bash", "-c", command], process.returncode, output, None)


def bash_background(command: str) -> subprocess.Popen[bytes]:
    """Start `command` with bash in its own process group, its output on the kernel's fd 1/2 (untagged)."""
    kernel = running_kernel()
    process = subprocess.Popen(["bash", "-c", command], stdin=subprocess.DEVNULL, start_new_session=True)
    kernel.child_started(process)
    return process


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)
