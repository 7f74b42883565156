"""The worker's session lock (daemon host): busy past its deadline or cancelled, it leaks no descriptor."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from pathlib import Path

import pytest

from eukhe.daemon.host import LOCK_NAME, SessionBusyError, lock_session


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.real
def test_a_lock_that_is_busy_or_cancelled_leaks_no_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EUKHE_SESSION_DIR", str(tmp_path))
    monkeypatch.setenv("EUKHE_SESSION_LOCK_WAIT_MS", "100")
    (tmp_path / "s1").mkdir()
    with open(tmp_path / "s1" / LOCK_NAME, "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another worker holds the session
        before = open_fds()
        with pytest.raises(SessionBusyError):
            asyncio.run(lock_session("s1"))
        assert open_fds() == before

        async def cancelled() -> None:
            waiting = asyncio.create_task(lock_session("s1"))
            await asyncio.sleep(0)  # let it open the lock file and start to wait
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting

        monkeypatch.setenv("EUKHE_SESSION_LOCK_WAIT_MS", "60000")
        asyncio.run(cancelled())
        assert open_fds() == before
