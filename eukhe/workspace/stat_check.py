"""The hand-back's first look at the recorded files (spec S3 "A subagent's workspace" 4): which of them the copy
may have changed, because their stat data now are not the ones the spawn recorded. Equal stat data, recorded before
the copy began, prove a file is the base's (racy git); every other file is read by the caller.

Standard library only: a large hand-back checks part of the record in a helper process started from this file
(`python -I -S stat_check.py`, `main`), for the reason the spawn copies in one (two processes make their system
calls at once). Groups go in and paths come out in `marshal` (the same interpreter on both sides), a frame per
group as the helper goes.
"""

from __future__ import annotations

import marshal
import os
import struct
import sys

TYPE_CHECKING = False  # true to a type checker; typing and collections.abc cost the helper's start ~20 ms
if TYPE_CHECKING:
    from collections.abc import Iterable

Group = tuple[str, list[tuple[str, bytes]]]
"""A directory of the copy (relative, "" for its root) and its recorded files: (name, packed stat data)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def packed_stat_of(pack: struct.Struct, st: os.stat_result) -> bytes:
    """A file's stat data as the spawn's record holds them (the core's `STAT_PACKING`)."""
    return pack.pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def unproven(copy_root: str, packing: str, groups: Iterable[Group]) -> list[str]:
    """The paths of `groups` whose file the stat data cannot prove unchanged: other stat data, nothing there, or a
    look that failed (the caller looks again, and reports what it finds)."""
    pack = struct.Struct(packing)
    found: list[str] = []
    for group in groups:
        check_group(pack, copy_root, group, found)
    return found


def check_group(pack: struct.Struct, copy_root: str, group: Group, found: list[str]) -> None:
    """The unproven paths of one group into `found`. Each file is looked up by its name in its directory's fd,
    opened without following a symlink there."""
    directory, files = group
    prefix = directory + "/" if directory else ""
    try:
        dir_fd = os.open(f"{copy_root}/{directory}" if directory else copy_root, _DIR_FLAGS)
    except OSError:
        found.extend(prefix + name for name, _ in files)
        return
    lstat, packed_of = os.lstat, packed_stat_of
    try:
        for name, recorded in files:
            try:
                now = packed_of(pack, lstat(name, dir_fd=dir_fd))
            except OSError:
                found.append(prefix + name)
                continue
            if now != recorded:
                found.append(prefix + name)
    finally:
        os.close(dir_fd)


FRAME_LENGTH = 4
"""The bytes of a frame's length (little-endian) before its marshal data."""


def main() -> int:
    """The helper: argv is the copy's root and the stat packing; stdin holds the groups (marshal). It checks them
    from the last one back and, after each, writes a frame to stdout: its length, then marshal of (the group's
    index, its unproven paths). The caller, checking them from the first on, kills it once the two sides met."""
    copy_root, packing = sys.argv[1:3]
    groups = marshal.loads(sys.stdin.buffer.read())
    pack = struct.Struct(packing)
    for index in range(len(groups) - 1, -1, -1):
        found: list[str] = []
        check_group(pack, copy_root, groups[index], found)
        frame = marshal.dumps((index, found))
        frame = len(frame).to_bytes(FRAME_LENGTH, "little") + frame
        while frame:
            frame = frame[os.write(1, frame) :]
    return 0


if __name__ == "__main__":
    sys.exit(main())
