"""The private /tmp as a tmpfs of `limits.max_tmp_mb` (docs/sandbox.md "Limits"): mounted on the session's tmp
directory on the host when its confinement starts, so bwrap's bind of it, the kernel and eukhe's file tools all see
one bounded file system; released (its content copied back into the directory) when the session closes or moves.

`eukhe.core.limits` decides whether (CAP_SYS_ADMIN, and the setting); this module does it, with the `mount` and
`umount` programs (util-linux). Invariants:
- A directory with content is never covered: its content is moved aside, copied into the new tmpfs, and removed
  only once all of it is there; if it does not fit (or anything fails), the mount is undone and the directory is
  as it was (then the limit holds as on a machine without the mount: per file).
- A mount already on the directory (a worker that died, with the session open) is released first, its content
  kept: the session's /tmp is what it held.
- Only the mount this session made is released by it (by its mount id): a later mount on the same directory is
  another's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

from eukhe import mounts

log = logging.getLogger("eukhe.tmpfs")
SOURCE = "eukhe-tmp"
"""The tmpfs' source name (mountinfo shows it)."""
MOUNT_S = 10.0


def cap_eff() -> int:
    """This process's effective capabilities (`CapEff` in /proc/self/status; 0 where unread)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def copy_into(source: Path, target: Path) -> None:
    """Copy the tree under `source` into the directory `target` (files, directories, symlinks, with their modes,
    times and owners; sockets and FIFOs are skipped). OSError on the first write that fails (ENOSPC: no room)."""
    stack = [(source, target)]
    directories: list[tuple[Path, os.stat_result]] = []  # their modes and times are set last: a read-only one
    while stack:
        here, there = stack.pop()
        with os.scandir(here) as listing:
            entries = list(listing)
        for entry in entries:
            found = entry.stat(follow_symlinks=False)
            dest = there / entry.name
            if stat.S_ISDIR(found.st_mode):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(dest, 0o700)
                stack.append((Path(entry.path), dest))
                directories.append((dest, found))
                continue
            if stat.S_ISLNK(found.st_mode):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(dest)
                os.symlink(os.readlink(entry.path), dest)
            elif stat.S_ISREG(found.st_mode):
                shutil.copy2(entry.path, dest, follow_symlinks=False)
            else:
                continue
            _own(dest, found)
    for dest, found in reversed(directories):
        _own(dest, found)


def _own(dest: Path, found: os.stat_result) -> None:
    """Give a copy its original's owner, mode and times (the owner only where eukhe may: root)."""
    with contextlib.suppress(OSError):
        os.chown(dest, found.st_uid, found.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(found.st_mode):
        os.chmod(dest, stat.S_IMODE(found.st_mode))
        os.utime(dest, ns=(found.st_atime_ns, found.st_mtime_ns))


def _aside(tmp: Path, what: str) -> Path:
    return tmp.with_name(f".{tmp.name}-{what}-{secrets.token_hex(4)}")


def mount(tmp: Path, size_mb: int) -> int | None:
    """Mount a tmpfs of `size_mb` MiB on the directory `tmp` (its mode and owner kept; nosuid, nodev), with what the
    directory held copied in; the mount's id, or None (not mounted, the directory as it was; logged)."""
    if mounts.at(tmp):
        release(tmp, None)  # left by a worker that died: its content is the session's /tmp
        if mounts.at(tmp):
            log.warning("tmpfs: %s is still a mount point: no tmpfs of the session's own", tmp)
            return None
    if shutil.which("mount") is None:
        log.warning("tmpfs: no mount program (util-linux): the private /tmp is bounded per file only")
        return None
    found = os.stat(tmp)
    before = _aside(tmp, "before")
    os.rename(tmp, before)
    os.mkdir(tmp, 0o700)
    options = f"size={size_mb}m,mode={stat.S_IMODE(found.st_mode):o},uid={found.st_uid},gid={found.st_gid},nosuid,nodev"
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, SOURCE, str(tmp)],
            capture_output=True,
            text=True,
            timeout=MOUNT_S,
            check=False,
        )
        if done.returncode != 0:
            raise OSError(f"mount: {done.stderr.strip()}")
        copy_into(before, tmp)
    except (OSError, subprocess.SubprocessError) as error:
        log.warning("tmpfs: no %s MiB tmpfs on %s (%s): the private /tmp is bounded per file only", size_mb, tmp, error)
        if mounts.at(tmp):
            mounts.unmount(str(tmp))
        if mounts.at(tmp):  # never: the directory under it is empty, and the content stays aside
            return None
        os.rmdir(tmp)
        os.rename(before, tmp)
        return None
    shutil.rmtree(before, ignore_errors=True)
    on = mounts.at(tmp)
    return on[-1].id if on else None


def release(tmp: Path, mount_id: int | None) -> None:
    """Copy what the tmpfs on `tmp` holds into the directory under it and unmount it (lazily if busy). With
    `mount_id`, only that mount, and only while it is on top (else another's: left alone); without, every mount on
    `tmp` (a dead worker's)."""
    while on := mounts.at(tmp):
        if mount_id is not None and on[-1].id != mount_id:
            return
        kept = _aside(tmp, "kept")
        os.mkdir(kept, 0o700)
        try:
            copy_into(tmp, kept)
        except OSError as error:  # the disk is full: what was copied is kept, the rest goes with the tmpfs
            log.warning("tmpfs: %s could not all be kept (%s)", tmp, error)
        if not mounts.unmount(str(tmp)):
            log.warning("tmpfs: cannot unmount %s", tmp)
            shutil.rmtree(kept, ignore_errors=True)
            return
        try:
            copy_into(kept, tmp)
        except OSError as error:
            log.warning("tmpfs: %s could not all be kept (%s)", tmp, error)
        shutil.rmtree(kept, ignore_errors=True)
        if mount_id is not None:
            return
