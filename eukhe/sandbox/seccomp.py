"""The keyring filter as bwrap reads it (docs/sandbox.md): `seccomp_args()` gives a launch
`--seccomp FD` and the fd to pass to bwrap, which loads the program (`eukhe.core.seccomp`) just before it runs the
command, so the command and everything it starts get EPERM from `add_key`, `request_key` and `keyctl`.

The fd is the read end of a fresh pipe per launch, the program already written into it and the write end closed:
bwrap reads it to EOF (the program is a few hundred bytes, under PIPE_BUF, so the write never blocks). One pipe per
launch because a shared fd would share its read offset: after the first bwrap read it to the end, the next would
read nothing. A pipe has no name and no writer left, so nothing can change the program between here and bwrap; it is
not inheritable (O_CLOEXEC): only the launch that lists it in `pass_fds` passes it on, to bwrap alone, which closes
it once read. The program's bytes are made once per process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
from collections.abc import Iterator, Sequence

from eukhe.core.limits import after_prelude
from eukhe.core.seccomp import keyring_filter
from eukhe.fsio import write_all


@functools.cache
def program() -> bytes | None:
    """This machine's filter (None: a machine `eukhe.core.seccomp` has no filter for)."""
    return keyring_filter(platform.machine())


def seccomp_args() -> tuple[tuple[str, ...], int | None]:
    """(`("--seccomp", FD)`, FD) for one bwrap launch, or `((), None)` on a machine without a filter.

    The caller puts the fragment among bwrap's options (before `--`), lists FD in `pass_fds` of that one spawn,
    and closes FD in the parent right after the spawn, whether it succeeded or not."""
    filter_bytes = program()
    if filter_bytes is None:
        return (), None
    read_end, write_end = os.pipe()  # both O_CLOEXEC: inherited only through pass_fds
    try:
        write_all(write_end, filter_bytes)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return ("--seccomp", str(read_end)), read_end


@contextlib.contextmanager
def keyring_filtered(argv: Sequence[str], *, confined: bool) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """A confined command (bwrap's, its program first) with the keyring filter among its options, and the fds its
    one spawn passes; the fd is closed in the parent when the block ends, whether the spawn succeeded or not. An
    unconfined command is given back as it is."""
    fragment, fd = seccomp_args() if confined else ((), None)
    at = after_prelude(argv) + 1  # bwrap's program: after the limits' prelude, when the launch has one
    try:
        yield [*argv[:at], *fragment, *argv[at:]], (() if fd is None else (fd,))
    finally:
        if fd is not None:
            os.close(fd)
