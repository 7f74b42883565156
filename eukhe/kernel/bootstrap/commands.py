"""Running the commands that build the kernel environment (uv, venv, pip): one runner, under a private umask."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from eukhe.kernel.bootstrap.errors import KernelSetupError

PRIVATE_UMASK = 0o077
"""The umask of every command that builds under the agent dir: what uv, venv and pip make is the user's alone."""


async def run_argv(argv: Sequence[str], action: str, env: Mapping[str, str] | None = None) -> str:
    """Run one build command (uv, venv, pip) under the private umask; its output, or a KernelSetupError naming the
    step."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=None if env is None else dict(env),
        umask=PRIVATE_UMASK,
    )
    output_bytes, _ = await process.communicate()
    output = output_bytes.decode(errors="replace")
    if process.returncode != 0:
        raise KernelSetupError(action, argv, process.returncode or 1, output)
    return output
