"""Helpers for tests with a real kernel: run a coroutine with a deadline, wait for a real event, raw kernels."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from eukhe.kernel.launch import kernel_launch
from eukhe.kernel.manager import CellRun

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """Run a test coroutine on a fresh loop, failing it past `timeout`."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def until(check: Callable[[], bool], timeout: float = 60.0, what: str = "a condition") -> None:
    """Poll a real condition with a bounded deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def until_output(run_: CellRun, marker: bytes, timeout: float = 60.0) -> None:
    """Wait until a cell's output shows `marker` (the cell is then really running)."""
    await until(lambda: marker in run_.output.snapshot().text, timeout, f"output {marker!r}")


def process_gone(pid: int) -> bool:
    """True if `pid` no longer runs (gone, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


class RawKernel:
    """A kernel stub driven directly over its pipes: the test plays the host."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.frames: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, env: dict[str, str] | None = None) -> RawKernel:
        launch = kernel_launch()
        process = await asyncio.create_subprocess_exec(
            *launch.argv,
            env={**launch.env, **(env or {})},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            process_group=0,
            limit=64 * 1024 * 1024,
        )
        kernel = cls(process)
        try:
            ready = await kernel.next_frame()
            assert ready["event"] == "ready"
        except BaseException:
            await kernel.close()  # a kernel that never said ready is not left running for a later test to find
            raise
        return kernel

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    async def next_frame(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await self.process.stdout.readline()
        assert line, "the kernel closed its stdout"
        frame: dict[str, Any] = json.loads(line)
        self.frames.append(frame)
        return frame

    async def until_frame(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            frame = await self.next_frame()
            if match(frame):
                return frame

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        finally:
            if self.process.returncode is None:
                os.killpg(self.process.pid, 9)
                await self.process.wait()
            await self.process.stdin.wait_closed()


async def gather_quietly(*aws: Awaitable[Any]) -> list[Any]:
    return list(await asyncio.gather(*aws, return_exceptions=True))
