"""A cell's large `rlm.fs.read` comes by reference (docs/fs.md, "By reference"): the host names the bytes and the
kernel reads them through its own mount, so the megabyte never crosses the kernel's pipe, and the cell gets the
answer the pipe would have carried. Bytes the kernel finds that are not the host's bring the text over the pipe.

What crossed the pipe is read from the operating system: the test process is the host, and /proc/self/io counts
every byte it wrote (the kernel's stdin among them).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eukhe.api import Session, SessionSettings, Settled
from eukhe.records.settings import KernelTransport, Mount
from tests.real.kernel_support import run
from tests.real.sandboxes import SANDBOX_PYTHON, need_root, wrapper
from tests.real.tools import need_tools

pytestmark = pytest.mark.real

MIB = 1 << 20
CONTENT = ("é" * 511 + "\n").encode() * 1024 + b"\xff tail without a newline"
"""A megabyte of lines, with a byte that is not UTF-8 at its end (the text has U+FFFD, `text_base64` the bytes)."""
READ = (
    "a = {call}\n"
    "import base64, zlib\n"
    "(len(a.text), zlib.crc32(a.text.encode()), zlib.crc32(base64.b64decode(a.output.text_base64)),"
    " a.total_lines, a.absolute, 'text_at' in a)"
)


def written() -> int:
    """Bytes this process has written so far (every write: files, pipes, sockets)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


async def read_in_cell(session: Session, call: str) -> tuple[Any, int]:
    """What a cell made of `call`'s answer, and the bytes the host wrote meanwhile."""
    before = written()
    answer = await session.ipython(READ.format(call=call), budget_ms=60_000)
    spent = written() - before
    assert isinstance(answer, Settled), answer
    assert answer.error is None, answer.error
    assert answer.result is not None
    return eval(answer.result), spent


def expected(absolute: str) -> tuple[int, int, int, int, str, bool]:
    text = CONTENT.decode("utf-8", errors="replace")
    return (len(text), zlib.crc32(text.encode()), zlib.crc32(CONTENT), 1025, absolute, False)


def test_a_cells_large_read_comes_by_reference_not_over_the_pipe(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "big.txt").write_bytes(CONTENT)

    async def scenario() -> None:
        settings = SessionSettings(truncation="off")
        session = await Session.create(work, root=tmp_path / "sessions", settings=settings)
        try:
            await session.ipython("1")  # the kernel is up
            shared, shared_cost = await read_in_cell(session, "rlm.fs.read('big.txt')")
            assert shared == expected(str(work / "big.txt"))
            assert shared_cost < MIB // 4
            # The same read with the text over the pipe (the request a kernel sends when it cannot share): the
            # host writes the megabyte, so the measure above would see it.
            params = "{'path': 'big.txt', 'offset': None, 'limit': None}"
            inline, inline_cost = await read_in_cell(session, f"rlm.fs._ask('fs.read', {params})")
            assert inline == shared
            assert inline_cost > MIB
        finally:
            await session.close()

    run(scenario())


@pytest.mark.parametrize("kind", ["setsid", "bwrap", "ssh"])
def test_a_wrapped_kernels_large_read_comes_by_reference_through_its_mount(kind: str, tmp_path: Path) -> None:
    """Under each real wrapper the kernel reads the megabyte at its sandbox path; the host writes a small answer."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "big.txt").write_bytes(CONTENT)
    with wrapper(kind, tmp_path, host) as (setting, sandbox):
        transport = msgspec.convert({**setting, "python": SANDBOX_PYTHON}, KernelTransport)

        async def scenario() -> None:
            settings = SessionSettings(truncation="off")
            session = await Session.create(
                host, root=tmp_path / "sessions", settings=settings, kernel_transport=transport
            )
            try:
                await session.ipython("1")  # the kernel is up
                got, cost = await read_in_cell(session, "rlm.fs.read('big.txt')")
                assert got == expected(f"{sandbox}/big.txt")
                assert cost < MIB // 4
            finally:
                await session.close()

        run(scenario())


def test_bytes_the_kernel_finds_that_are_not_the_hosts_bring_the_text_over_the_pipe(tmp_path: Path) -> None:
    """Under bubblewrap a different file of the same length covers the shared one at its sandbox path: the host
    reads its own, the kernel's sum does not match, and the cell gets the host's text."""
    need_root("bubblewrap")
    need_tools("bwrap")
    work = tmp_path / "work"
    work.mkdir()
    (work / "big.txt").write_bytes(CONTENT)
    cover = tmp_path / "cover.txt"
    cover.write_bytes(CONTENT.replace(b"\n", b"!", 1))
    prefix = ["bwrap", "--ro-bind", "/", "/", "--bind", str(work), "/work", "--ro-bind", str(cover), "/work/big.txt"]
    prefix += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--die-with-parent"]
    mounts = [Mount(sandbox="/work", host=str(work))]
    transport = KernelTransport(argv_prefix=prefix, python=SANDBOX_PYTHON, path_map=mounts)

    async def scenario() -> None:
        settings = SessionSettings(truncation="off")
        session = await Session.create(work, root=tmp_path / "sessions", settings=settings, kernel_transport=transport)
        try:
            got, cost = await read_in_cell(session, "rlm.fs.read('big.txt')")
            assert got == expected("/work/big.txt")
            assert cost > MIB
            misses = await session.ipython("rlm.fs._by_reference['misses']")
            assert isinstance(misses, Settled) and misses.result == "1"
        finally:
            await session.close()

    run(scenario())
