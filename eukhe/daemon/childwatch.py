"""How a daemon worker learns of its children's ends on Python 3.11: through pidfds, and through a thread only when
no descriptor is left for a pidfd.

asyncio's default watcher before 3.12 starts a waitpid thread per child (a start per job on the call's path, and
memory per running job), so the worker uses `asyncio.PidfdChildWatcher`. That one needs a descriptor per child, and
asyncio asks for it after the child is spawned: on EMFILE (out of descriptors) the subprocess call fails with the
child already running and nobody to reap it or end its group. This watcher then waits for that child on a thread,
as asyncio's default would, so a full descriptor table costs a thread, never a lost child.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import TypeVarTuple

Ts = TypeVarTuple("Ts")

EXIT_UNKNOWN = 255
"""The code asyncio reports for a child whose status another waitpid took."""


class PidfdOrThreadWatcher(asyncio.PidfdChildWatcher):
    """`asyncio.PidfdChildWatcher`, falling back to a waitpid thread for a child it cannot open a pidfd for."""

    def add_child_handler(self, pid: int, callback: Callable[[int, int, *Ts], object], *args: *Ts) -> None:
        try:
            super().add_child_handler(pid, callback, *args)
        except OSError:  # EMFILE or ENFILE: no descriptor for a pidfd
            loop = self._loop  # type: ignore[attr-defined]
            waiter = threading.Thread(
                target=_wait_on_thread, args=(loop, pid, callback, args), name=f"eukhe-waitpid-{pid}", daemon=True
            )
            waiter.start()


def _wait_on_thread(
    loop: asyncio.AbstractEventLoop,
    pid: int,
    callback: Callable[[int, int, *Ts], object],
    args: tuple[*Ts],
) -> None:
    try:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        code = EXIT_UNKNOWN
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for the child any more
        loop.call_soon_threadsafe(callback, pid, code, *args)
