"""The bootstrap lock: one process at a time sets up a venv (spec "The kernel environment" 5).

The shell half of `eukhe.core.kernel_local`: it reads the directory, the lock's contents (pid and start time), the
pids' liveness and start times from /proc, the lock's age; asks the core; and removes, renames or waits as told.
An attempt writes `<lock>.candidate-<pid>-<n>` with our pid and start time, publishes it with link(2), and removes
the candidate on every path (also on an error or a cancellation).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from eukhe.clock import Clock, MonotonicClock, sleep_ms
from eukhe.core.kernel_local import (
    LOCK_NAME,
    AttemptVerdict,
    BesideKind,
    Effect,
    LinkOutcome,
    LockFacts,
    Owner,
    SweepVerdict,
    attempt_effects,
    beside_name,
    format_owner,
    judge_attempt,
    judge_sweep,
    parse_beside,
    parse_owner,
)
from eukhe.fsio import write_all
from eukhe.kernel.bootstrap.errors import BootstrapLockTimeoutError
from eukhe.private_fs import create_private_file, make_private_dirs
from eukhe.procs import start_ticks

_COUNTER = itertools.count()
"""This process's counter `<n>` for candidate and stale names: never the same name twice in one process."""


process_start = start_ticks
"""The start time (clock ticks since boot) of the live process `pid`; None if there is none (or a zombie)."""


def me() -> Owner:
    """This process as a lock owner."""
    pid = os.getpid()
    start = process_start(pid)
    if start is None:  # pragma: no cover - /proc/self always exists on Linux
        raise RuntimeError("cannot read this process's start time from /proc")
    return Owner(pid, start)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


@dataclass(frozen=True, slots=True)
class SweepDecision:
    """One file the sweep judged, with what it decided (tests compare these with the core's answers)."""

    name: str
    recorded_start: int | None
    running_start: int | None
    verdict: SweepVerdict


def sweep(directory: Path) -> list[SweepDecision]:
    """Remove the candidates and stale files of processes that are gone; keep a live process's."""
    decisions: list[SweepDecision] = []
    for name in sorted(os.listdir(directory)):
        parsed = parse_beside(name)
        if parsed is None:
            continue
        recorded: int | None = None
        if parsed.kind is BesideKind.CANDIDATE:
            owner = parse_owner(_read_text(directory / name) or "")
            if owner is not None and owner.pid == parsed.pid:
                recorded = owner.start
        running = process_start(parsed.pid)
        verdict = judge_sweep(recorded, running)
        if verdict is SweepVerdict.REMOVE:
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
        decisions.append(SweepDecision(name, recorded, running, verdict))
    return decisions


def read_lock_facts(lock: Path, now: float | None = None) -> tuple[LockFacts, int | None]:
    """What the existing lock says: the core's facts, and its inode (to check a rename took this very lock)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return LockFacts(present=False, owner=None, running_start=None, age_ms=None), None
    try:
        info = os.fstat(fd)
        text = os.read(fd, 256).decode(errors="replace")
    finally:
        os.close(fd)
    owner = parse_owner(text)
    running = process_start(owner.pid) if owner is not None else None
    age_ms = max(0, int(((time.time() if now is None else now) - info.st_mtime) * 1000))
    return LockFacts(present=True, owner=owner, running_start=running, age_ms=age_ms), info.st_ino


class BootstrapLock:
    """`kernel-venv.bootstrap.lock` in `directory`; `async with` holds it (waiting, sweeping, setting aside)."""

    def __init__(
        self, directory: Path, *, timeout: float | None = 900.0, poll: float = 0.05, clock: Clock | None = None
    ) -> None:
        self.directory = directory
        self.clock = clock if clock is not None else MonotonicClock()
        self.path = directory / LOCK_NAME
        self.timeout = timeout
        self.poll = poll
        self.owner: Owner | None = None
        self.waited = False  # whether an attempt found the lock held (tests read it)

    async def __aenter__(self) -> BootstrapLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    async def acquire(self) -> None:
        """Attempt until the lock is ours; wait between attempts while it is held."""
        make_private_dirs(self.directory)
        owner = me()
        deadline = None if self.timeout is None else self.clock.now_ms() + round(self.timeout * 1000)
        delay = self.poll
        sweep(self.directory)
        while True:
            effect = self._attempt(owner)
            if effect is Effect.HOLD:
                self.owner = owner
                return
            if effect is Effect.WAIT:
                self.waited = True
                if deadline is not None and self.clock.now_ms() > deadline:
                    raise BootstrapLockTimeoutError(f"another process holds {self.path} for more than {self.timeout}s")
                await sleep_ms(self.clock, round(delay * 1000))
                delay = min(delay * 1.5, 0.5)
                sweep(self.directory)

    def _attempt(self, owner: Owner) -> Effect:
        """One attempt: write and link a candidate, then do what the core says; the candidate goes on every path."""
        candidate = self.directory / beside_name(BesideKind.CANDIDATE, owner.pid, next(_COUNTER))
        verdict: AttemptVerdict | None = None
        inode: int | None = None
        stale: Path | None = None
        try:
            try:
                fd = create_private_file(candidate)
                try:
                    write_all(fd, format_owner(owner).encode())
                finally:
                    os.close(fd)
            except OSError:
                outcome = LinkOutcome.WRITE_FAILED
            else:
                try:
                    os.link(candidate, self.path)
                    outcome = LinkOutcome.LINKED
                except FileExistsError:
                    outcome = LinkOutcome.EXISTS
                    facts, inode = read_lock_facts(self.path)
                    verdict = judge_attempt(facts)
                except OSError:
                    outcome = LinkOutcome.LINK_FAILED
            last = Effect.FAIL
            for effect in attempt_effects(outcome, verdict):
                last = effect
                if effect is Effect.REMOVE_CANDIDATE:
                    _unlink(candidate)
                elif effect is Effect.RENAME_ASIDE:
                    stale = self._set_aside(owner, inode)
                elif effect is Effect.REMOVE_STALE and stale is not None:
                    _unlink(stale)
                elif effect is Effect.FAIL:
                    raise OSError(f"cannot take the bootstrap lock {self.path} ({outcome.value})")
            return last
        finally:
            _unlink(candidate)  # a safety net for errors and cancellation between the write and the link
            if stale is not None:
                _unlink(stale)

    def _set_aside(self, owner: Owner, inode: int | None) -> Path | None:
        """Rename the abandoned lock to our `stale-<pid>-<n>` (the caller removes it next); None if it was gone."""
        stale = self.directory / beside_name(BesideKind.STALE, owner.pid, next(_COUNTER))
        try:
            os.rename(self.path, stale)
        except FileNotFoundError:
            return None  # someone else set it aside first
        # A race: between our judgement and the rename another process may have set the old lock aside and linked
        # its own. If the rename took a lock other than the one judged, put it back (link never clobbers).
        if inode is not None and os.stat(stale).st_ino != inode:
            with contextlib.suppress(FileExistsError):
                os.link(stale, self.path)
        return stale

    def release(self) -> None:
        """Remove the lock if it is still ours."""
        if self.owner is None:
            return
        if parse_owner(_read_text(self.path) or "") == self.owner:
            _unlink(self.path)
        self.owner = None


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@contextlib.asynccontextmanager
async def bootstrap_lock(directory: Path, *, timeout: float | None = 900.0) -> AsyncIterator[BootstrapLock]:
    """Hold the bootstrap lock of `directory` for the body."""
    lock = BootstrapLock(directory, timeout=timeout)
    async with lock:
        yield lock
