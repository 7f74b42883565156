"""The mounts below a directory, from /proc/self/mountinfo, and unmounting them: what a session's private /tmp
needs when it is a tmpfs of its own (`eukhe.sandbox.tmpfs`), and what deleting a session directory needs first (a
tmpfs left by a worker that died must not keep its directory from going).

Unmounting runs the `umount` program (util-linux), and falls back to a lazy unmount (`umount -l`) when the mount is
busy: the file system goes once nothing uses it. Where eukhe may not unmount (not root), nothing here is asked: no
mount of eukhe's is there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("eukhe.mounts")
MOUNTINFO = "/proc/self/mountinfo"
UMOUNT_S = 10.0
"""An unmount's own time; past it, the unmount counts as failed."""
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of mountinfo: the mount's id, where it is, its file system type and source."""

    id: int
    point: str
    fstype: str
    source: str


def unescaped(field: str) -> str:
    """A mountinfo path as it is (the kernel writes space, tab, newline and backslash as octal escapes)."""
    return _ESCAPE.sub(lambda found: chr(int(found[1], 8)), field)


def mounts(text: str | None = None) -> list[Mount]:
    """The mounts of this process's namespace, in mountinfo's order (a later one at a point is on top)."""
    if text is None:
        try:
            with open(MOUNTINFO, encoding="utf-8", errors="surrogateescape") as handle:
                text = handle.read()
        except OSError:
            return []
    found: list[Mount] = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 2 and fields[0].isdigit():
            found.append(Mount(int(fields[0]), unescaped(fields[4]), tail[0], unescaped(tail[1])))
    return found


def at(path: Path | str) -> list[Mount]:
    """The mounts on `path` itself (its real path), the lowest first."""
    point = os.path.realpath(path)
    return [mount for mount in mounts() if mount.point == point]


def below(path: Path | str) -> list[Mount]:
    """The mounts on `path` or anywhere below it, the deepest (and the latest) first: the order to unmount them."""
    top = os.path.realpath(path)
    found = [mount for mount in mounts() if mount.point == top or mount.point.startswith(top.rstrip("/") + "/")]
    return [mount for _, mount in sorted(enumerate(found), key=lambda item: (-item[1].point.count("/"), -item[0]))]


def unmount(point: str) -> bool:
    """Unmount the top mount on `point`: at once, else lazily (busy); whether it went."""
    for argv in (["umount", point], ["umount", "-l", point]):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=UMOUNT_S, check=False)
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("mounts: %s failed: %s", " ".join(argv), error)
            continue
        if done.returncode == 0:
            return True
        log.info("mounts: %s: %s", " ".join(argv), done.stderr.strip())
    return False


def release_below(path: Path | str) -> list[str]:
    """Unmount every mount on or below `path` (before its directory is deleted or renamed); the points that could
    not be unmounted."""
    left: list[str] = []
    for mount in below(path):
        with contextlib.suppress(OSError):
            if not unmount(mount.point):
                left.append(mount.point)
    return left
