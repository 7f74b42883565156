"""A full descriptor table, for real: RLIMIT_NOFILE lowered to the descriptors open now, and every free one below it
taken. Only for a test's child process: it changes the limit of the process it runs in, and puts it back."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator


@contextlib.contextmanager
def descriptor_table_full() -> Iterator[None]:
    """While inside, opening any descriptor fails with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    fillers: list[int] = []
    try:
        while True:
            try:
                fillers.append(os.dup(0))
            except OSError:
                break
        yield
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
