"""Opening without following symlinks (`eukhe.beneath`), both ways the module has: `openat2` and the component walk."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from eukhe import beneath


@pytest.fixture(params=["openat2", "walk"], autouse=True)
def way(request: pytest.FixtureRequest) -> Iterator[str]:
    beneath.use_openat2(request.param == "openat2")
    if request.param == "openat2":
        try:
            os.close(beneath.open_nofollow("/", os.O_RDONLY | os.O_DIRECTORY))
        except OSError:
            pytest.skip("this kernel has no openat2")
    try:
        yield str(request.param)
    finally:
        beneath.use_openat2(None)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "inside" / "deep").mkdir(parents=True)
    (tmp_path / "inside" / "deep" / "file").write_text("inside\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file").write_text("secret\n")
    (tmp_path / "inside" / "link").symlink_to(tmp_path / "outside")
    (tmp_path / "inside" / "final").symlink_to(tmp_path / "outside" / "file")
    return tmp_path.resolve()


def read(fd: int) -> bytes:
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def test_a_symlink_free_path_opens(tree: Path) -> None:
    assert read(beneath.open_nofollow(str(tree / "inside" / "deep" / "file"), os.O_RDONLY)) == b"inside\n"


@pytest.mark.parametrize("where", ["inside/link/file", "inside/final"])
def test_a_symlink_in_any_component_is_eloop(tree: Path, where: str) -> None:
    with pytest.raises(OSError) as raised:
        beneath.open_nofollow(str(tree / where), os.O_RDONLY)
    assert raised.value.errno == errno.ELOOP


def test_dotdot_and_an_absolute_path_beneath_a_directory_are_refused(tree: Path) -> None:
    with pytest.raises(OSError):
        beneath.open_nofollow(str(tree / "inside" / ".." / "outside" / "file"), os.O_RDONLY)
    base = beneath.open_dir(str(tree / "inside"))
    try:
        assert read(beneath.open_nofollow("deep/file", os.O_RDONLY, dir_fd=base)) == b"inside\n"
        for escape in ("../outside/file", str(tree / "outside" / "file"), "link/file"):
            with pytest.raises(OSError):
                beneath.open_nofollow(escape, os.O_RDONLY, dir_fd=base)
    finally:
        os.close(base)


def test_read_regular_refuses_a_fifo_without_blocking_a_device_a_link_and_a_large_file(tree: Path) -> None:
    fifo = tree / "inside" / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(beneath.NotRegularError):
        beneath.read_regular(str(fifo), 100)
    with pytest.raises(beneath.NotRegularError):
        beneath.read_regular("/dev/zero", 100)
    (tree / "inside" / "zero").symlink_to("/dev/zero")
    with pytest.raises(OSError) as raised:
        beneath.read_regular(str(tree / "inside" / "zero"), 100)
    assert raised.value.errno == errno.ELOOP
    (tree / "inside" / "big").write_bytes(b"x" * 101)
    with pytest.raises(beneath.TooLargeError):
        beneath.read_regular(str(tree / "inside" / "big"), 100)
    assert beneath.read_regular(str(tree / "inside" / "big"), 101) == b"x" * 101


def test_a_directory_swapped_for_a_symlink_in_a_loop_never_opens_what_lies_outside(tree: Path) -> None:
    """The race a confined cell ran against the file tools: `inside/swap` is a directory, then a symlink to the
    outside, again and again, while the file under it is opened by its checked path."""
    swap = tree / "inside" / "swap"
    swap.mkdir()
    (swap / "file").write_text("inside\n")
    parked = tree / "inside" / "parked"
    stop = threading.Event()

    def swapper() -> None:
        link = tree / "inside" / "swap-link"
        while not stop.is_set():
            link.symlink_to(tree / "outside")
            os.rename(swap, parked)
            os.rename(link, swap)
            os.rename(swap, link)
            os.rename(parked, swap)
            link.unlink()

    thread = threading.Thread(target=swapper)
    thread.start()
    seen: set[bytes] = set()
    try:
        for _ in range(3000):
            try:
                seen.add(read(beneath.open_nofollow(str(swap / "file"), os.O_RDONLY)))
            except OSError:
                continue
    finally:
        stop.set()
        thread.join()
    assert b"secret\n" not in seen
    assert b"inside\n" in seen
