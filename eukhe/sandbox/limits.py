"""The shell of `eukhe.core.limits`: find what the machine offers, make the session's control groups, write their
limits, read their counters and the private /tmp's size, and remove the groups when the session closes
(docs/sandbox.md "Limits").

A session's groups are named `eukhe-<worker pid>-<session dir name>`, made below the groups this process is in (a v2
hierarchy where the pids and memory controllers are enabled for children, else each v1 hierarchy of them), and
only where eukhe may write there (root, or a delegated subtree). Groups whose worker is gone are removed at the next
start (a group can only be removed once empty).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
from pathlib import Path

from eukhe import mounts
from eukhe.core import limits as core
from eukhe.sandbox import tmpfs

log = logging.getLogger("eukhe.limits")
PROC_CGROUP = "/proc/self/cgroup"
MOUNTINFO = "/proc/self/mountinfo"
GROUP_PREFIX = "eukhe-"
MAX_NOTED = 4096
"""At most this many jobs' starting counters are kept (a job's answer takes its own)."""
MAX_TMP_ENTRIES = 200_000
"""The size of the private /tmp is counted over at most this many entries (a tree larger than that counts as
what was seen: the check stays bounded)."""


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def hierarchies() -> list[tuple[int, str, frozenset[str]]]:
    """The cgroup hierarchies mounted here: (version, directory of this process's group there, its controllers)."""
    mine: dict[str, str] = {}  # controllers of a v1 line ("pids", "cpu,cpuacct") or "" for v2: this process's path
    for line in _read(PROC_CGROUP).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            mine[parts[1]] = parts[2]
    found: list[tuple[int, str, frozenset[str]]] = []
    for line in _read(MOUNTINFO).splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, point, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2" and "" in mine:
            path = point + _below(mine[""], root)
            controllers = frozenset(_read(os.path.join(path, "cgroup.subtree_control")).split())
            found.append((2, path, controllers))
        elif fstype == "cgroup":
            names = frozenset(option for option in options if option in ("pids", "memory"))
            key = next((key for key in mine if names and set(key.split(",")) >= names), None)
            if names and key is not None:
                found.append((1, point + _below(mine[key], root), names))
    return found


def _below(path: str, root: str) -> str:
    """A group's path as seen from a mount of its hierarchy whose root is `root`."""
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return "" if path == "/" else path


def memory_total_mb() -> int:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 0


def user_tasks(uid: int) -> int:
    """The tasks (processes and threads) of user `uid` now: what RLIMIT_NPROC counts."""
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    total += len(os.listdir(f"/proc/{entry}/task"))
    return total


def tmp_used_mb(tmp: Path) -> int:
    """The private /tmp's size in MiB (allocated blocks; each inode once), over at most MAX_TMP_ENTRIES entries."""
    seen: set[tuple[int, int]] = set()
    total, entries = 0, 0
    stack = [str(tmp)]
    while stack and entries < MAX_TMP_ENTRIES:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as listing:
            for entry in listing:
                entries += 1
                with contextlib.suppress(OSError):
                    stat = entry.stat(follow_symlinks=False)
                    if (stat.st_dev, stat.st_ino) not in seen:
                        seen.add((stat.st_dev, stat.st_ino))
                        total += stat.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
    return total >> 20


class SessionLimits:
    """One session's limits: its groups (made at `start`), the tmpfs on its private /tmp (mounted at `start`, where
    eukhe may), the plan, and the counters a run is judged by."""

    def __init__(self, settings: core.Settings, session_dir: Path, tmp: Path | None = None) -> None:
        self.settings = settings
        self.tmp = tmp
        """The private /tmp's directory on the host (None: none to bound)."""
        self.tmp_mount: int | None = None
        """The id of the tmpfs mounted on it (None: none)."""
        self.may_mount = False
        """Whether eukhe may mount a tmpfs here (found at `start`)."""
        self.name = f"{GROUP_PREFIX}{os.getpid()}-{session_dir.name}"
        self.groups: list[core.Group] = []
        self.plan: core.Plan | None = None
        self._started: dict[str, core.Counters] = {}  # a job's id: the counters at its start

    def start(self) -> core.Plan:
        """Make the session's groups where the machine lets eukhe (once), and decide the plan."""
        if self.plan is not None:
            return self.plan
        made: list[core.Group] = []
        for version, parent, controllers in hierarchies():
            for controller in (core.Controller.PIDS, core.Controller.MEMORY):
                if controller.value not in controllers or any(group.controller is controller for group in made):
                    continue
                if version == 1 and any(group.version == 2 and group.controller is controller for group in made):
                    continue
                path = os.path.join(parent, self.name)
                _sweep(parent)
                try:
                    os.makedirs(path, exist_ok=True)
                except OSError:
                    continue
                made.append(core.Group(controller, version, path))
        machine = core.Machine(
            root=os.geteuid() == 0,
            memory_total_mb=memory_total_mb(),
            groups=tuple(sorted(made, key=lambda group: -group.version)),
            user_tasks=0 if os.geteuid() == 0 else user_tasks(os.geteuid()),
            tmpfs=self.tmp is not None and core.may_mount(tmpfs.cap_eff()),
        )
        self.may_mount = machine.tmpfs
        chosen = core.plan(self.settings, machine)
        for path, content in chosen.writes:
            try:
                with open(path, "w", encoding="ascii") as handle:
                    handle.write(content)
            except OSError as error:
                if not path.endswith("memory.swap.max"):  # a kernel without swap accounting has none
                    log.warning("limits: cannot write %s (%s): the plan is made again without that group", path, error)
                    failed = next(group for group in made if path.startswith(group.path + "/"))
                    made.remove(failed)
                    _remove(failed.path)
                    machine = dataclasses.replace(machine, groups=tuple(made))
                    chosen = core.plan(self.settings, machine)
        self.groups = [group for group in made if group in chosen.groups]
        for group in made:
            if group not in chosen.groups:
                _remove(group.path)
        self.plan = chosen
        self._mount_tmp()
        return self.plan

    def _mount_tmp(self) -> None:
        """Mount the private /tmp's tmpfs if the plan asks for one; if it cannot be, the plan is made again
        without (the limit then holds per file)."""
        size = None if self.plan is None else core.tmpfs_size_mb(self.plan)
        if self.tmp is None:
            return
        if size is None:
            if self.may_mount and mounts.at(self.tmp):  # a dead worker's, with the limit since set to 0
                with contextlib.suppress(OSError):
                    tmpfs.release(self.tmp, None)
            return
        try:
            self.tmp_mount = tmpfs.mount(self.tmp, size)
        except OSError as error:
            log.warning("limits: no tmpfs on %s (%s)", self.tmp, error)
            self.tmp_mount = None
        if self.tmp_mount is None:
            self.plan = core.plan(self.settings, self._machine(tmpfs=False))

    def _machine(self, *, tmpfs: bool) -> core.Machine:
        """The machine as found at `start` (its groups those kept), with or without the tmpfs."""
        groups = tuple(sorted(self.groups, key=lambda group: -group.version))
        root = os.geteuid() == 0
        return core.Machine(root, memory_total_mb(), groups, 0 if root else user_tasks(os.geteuid()), tmpfs=tmpfs)

    def move_tmp(self, tmp: Path) -> None:
        """The session continues in another directory (a fork): the old private /tmp's tmpfs is released (its
        content kept in the old directory, which the old session reopens with), the new one gets its own."""
        self._release_tmp()
        self.tmp = tmp
        if self.plan is not None:
            self.plan = core.plan(self.settings, self._machine(tmpfs=self.may_mount))
            self._mount_tmp()

    def _release_tmp(self) -> None:
        if self.tmp is not None and self.tmp_mount is not None:
            try:
                tmpfs.release(self.tmp, self.tmp_mount)
            except OSError as error:
                log.warning("limits: cannot release the tmpfs on %s (%s)", self.tmp, error)
        self.tmp_mount = None

    def prelude(self) -> tuple[str, ...]:
        """The argv a launch puts before bwrap's (joining the groups, setting the rlimits); made again each launch
        since a group may have been swept meanwhile."""
        plan = self.start()
        for group in plan.groups:
            with contextlib.suppress(OSError):
                os.makedirs(group.path, exist_ok=True)
        return core.prelude(plan)

    def counters(self) -> core.Counters:
        """The groups' event counters now."""
        pids = next((group for group in self.groups if group.controller is core.Controller.PIDS), None)
        memory = next((group for group in self.groups if group.controller is core.Controller.MEMORY), None)
        pids_max = None if pids is None else core.count(_read(f"{pids.path}/pids.events"), "max")
        oom = None
        if memory is not None:
            events = "memory.events" if memory.version == 2 else "memory.oom_control"
            oom = core.count(_read(f"{memory.path}/{events}"), "oom_kill")
        return core.Counters(pids_max, oom)

    def job_started(self, job_id: str) -> None:
        """Note the counters at a job's start (its answer is judged by how they rose)."""
        if self.plan is not None and self.groups:
            if len(self._started) >= MAX_NOTED:  # jobs whose answer never came (ended unwaited): the oldest go
                del self._started[next(iter(self._started))]
            self._started[job_id] = self.counters()

    def started(self, job_id: str | None) -> core.Counters:
        """The counters at a job's start (taken once: its answer is judged once)."""
        return self._started.pop(job_id, core.Counters()) if job_id is not None else core.Counters()

    def close(self) -> None:
        """End what is left in the session's groups and remove them; release the private /tmp's tmpfs (its content
        kept in the directory)."""
        for group in self.groups:
            _remove(group.path, kill=True)
        self.groups = []
        self._release_tmp()


def _remove(path: str, *, kill: bool = False) -> None:
    """Remove a group (it must be empty: with `kill`, its processes are SIGKILLed first, once)."""
    if kill:
        for line in _read(os.path.join(path, "cgroup.procs")).split():
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.kill(int(line), signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _sweep(parent: str) -> None:
    """Remove the empty groups of workers that are gone (`eukhe-<pid>-...` whose pid lives no more)."""
    with contextlib.suppress(OSError), os.scandir(parent) as listing:
        for entry in listing:
            if not entry.name.startswith(GROUP_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            pid = entry.name[len(GROUP_PREFIX) :].partition("-")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)
