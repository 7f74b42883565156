"""The kernel's request reader thread sleeps through a burst of short cells: a wake would take the GIL from a cell."""

from __future__ import annotations

import pytest

from eukhe.core.bound import Off
from eukhe.kernel.manager import KernelManager
from tests.real.kernel_support import run

pytestmark = pytest.mark.real

BURST = 200

READER_SWITCHES = (
    "import threading\n"
    "_reader = next(t for t in threading.enumerate() if t.name == 'eukhe-kernel-reader').native_id\n"
    "def _reader_switches():\n"
    "    with open(f'/proc/self/task/{_reader}/status') as status:\n"
    "        return sum(int(line.split()[1]) for line in status if 'ctxt_switches' in line)\n"
)


def test_a_burst_of_cells_wakes_no_reader_thread() -> None:
    """Each wake of the thread (blocked in its epoll wait) is a context switch of its task: a burst of cells the
    host sends one after another, none of them with input arriving while it runs, adds none."""

    async def scenario() -> None:
        async with KernelManager(truncation=Off()) as km:
            assert (await km.run(READER_SWITCHES)).status == "ok"
            before = await km.run("_switches_before = _reader_switches()\n_switches_before")
            assert before.status == "ok", before
            for _ in range(BURST):
                assert (await km.run("1+1")).result == "2"
            after = await km.run("_reader_switches() - _switches_before")
            assert after.result == "0", f"the reader thread woke {after.result} times in a burst of {BURST} cells"

    run(scenario())
