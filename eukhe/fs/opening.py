"""Acting on a checked place so that what was checked is what is acted on.

`Locator.place` resolves a request path on the host disk (symlinks followed as the kernel would) and checks the
policy on the symlink-free host path it found. A confined process can change the tree in between: swap a directory
of that path for a symlink to `~/.ssh` or out of the workspace. So nothing here opens a place by name: the place's
host path, which holds no symlink, is opened following none (`eukhe.beneath`), and a write works through the
descriptor of its directory (`*at` calls). A component that became a symlink since the check is refused
(`symlink_loop`, saying that the path changed), never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass, field

from eukhe import beneath
from eukhe.fs.errors import FsError, Reason, os_error


def changed(asked: str, doing: str) -> FsError:
    """The refusal of a place whose path changed under the tool (a directory of it became a symlink)."""
    return FsError(
        Reason.SYMLINK_LOOP,
        asked,
        f"cannot {doing} {asked}: the path changed while it was opened (a directory of it became a symlink); "
        "nothing was done",
    )


def refused(error: OSError, asked: str, doing: str) -> FsError:
    """An OS error met opening a checked place: ELOOP means a symlink appeared on its way."""
    return changed(asked, doing) if error.errno == errno.ELOOP else os_error(error, asked, doing)


def open_checked(host: str, flags: int, asked: str, doing: str, mode: int = 0o666) -> int:
    """Open a checked host path following no symlink; an `FsError` naming the caller's path."""
    try:
        return beneath.open_nofollow(host, flags, mode)
    except OSError as error:
        raise refused(error, asked, doing) from error


@dataclass(slots=True)
class Parents:
    """The directories of the targets of one write or edit, each opened once (following no symlink); those made for
    it are remembered, so that a failure removes them again (innermost first, where they are still empty)."""

    asked: str
    doing: str
    opened: dict[str, int] = field(default_factory=dict)
    made: list[tuple[str, str]] = field(default_factory=list)  # (parent host dir, name) of each directory made

    def fd(self, directory: str, *, make: bool) -> int:
        """The open directory at a host path (symlink-free), made with its missing parents when `make`."""
        known = self.opened.get(directory)
        if known is not None:
            return known
        try:
            fd = beneath.open_dir(directory)
        except FileNotFoundError:
            if not make or directory == "/":
                raise
            above, name = os.path.split(directory)
            outer = self.fd(above, make=True)
            try:
                os.mkdir(name, dir_fd=outer)
                self.made.append((above, name))
            except FileExistsError:
                pass  # made by someone else meanwhile: theirs, not ours to remove
            fd = beneath.open_dir(name, dir_fd=outer)
        self.opened[directory] = fd
        return fd

    def parent(self, host: str, *, make: bool) -> tuple[int, str]:
        """(the open directory of a host path, the path's last name), refusing as the caller's path."""
        directory, name = os.path.split(host)
        try:
            return self.fd(directory, make=make), name
        except OSError as error:
            raise refused(error, self.asked, self.doing) from error

    def remove_made(self) -> None:
        """Remove the directories made for this write (innermost first), where they are still empty."""
        for above, name in reversed(self.made):
            outer = self.opened.get(above)
            if outer is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=outer)
        self.made.clear()

    def sync(self, directory: str) -> None:
        """Flush a directory's entries to disk, where the file system allows it (durability, not safety)."""
        fd = self.opened.get(directory)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(fd)

    def close(self) -> None:
        for fd in self.opened.values():
            os.close(fd)
        self.opened.clear()

    def __enter__(self) -> Parents:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
