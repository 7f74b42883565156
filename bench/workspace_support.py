"""Shared by the workspace benchmarks: a generated git work tree, and an XFS reflink loop mount when run as root."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.org",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.org",
}


def git(directory: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=directory, env=GIT_ENV, check=True, capture_output=True)


def make_git_tree(root: Path, files: int, total_bytes: int, seed: int = 11) -> list[str]:
    """A committed git work tree of `files` files (about `total_bytes` in all) in two levels of directories, plus an
    ignored target/ the copy must skip; returns the tracked paths."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / ".gitignore").write_text("target/\n*.o\n")
    # Most files are small, a tenth are large: about total_bytes / files each on average.
    mean = total_bytes // files
    small, large = max(1, mean // 4), mean * 7
    paths = [".gitignore"]
    chunk = rng.randbytes(large * 2)
    for index in range(files - 1):
        relative = f"src/m{index % 25:02d}/p{index % 400 // 25:02d}/f{index}.txt"
        size = large if index % 10 == 0 else small
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        offset = rng.randrange(len(chunk) - size)
        path.write_bytes(chunk[offset : offset + size])
        paths.append(relative)
    (root / "target" / "debug").mkdir(parents=True)
    for index in range(200):
        (root / "target" / "debug" / f"build{index}.o").write_bytes(b"\0" * 4096)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "generated")
    return paths


def tree_bytes(paths: list[str], root: Path) -> int:
    return sum(os.lstat(root / p).st_size for p in paths)


@contextlib.contextmanager
def xfs_reflink_mount(size_mb: int = 1024) -> Iterator[Path | None]:
    """An XFS filesystem with reflink, loop-mounted; None (with the reason printed) when it cannot be made."""
    if os.geteuid() != 0 or shutil.which("mkfs.xfs") is None:
        print("XFS: skipped (needs root and mkfs.xfs from xfsprogs)")
        yield None
        return
    work = Path(tempfile.mkdtemp(prefix="ek-bench-xfs-"))
    image, mount = work / "xfs.img", work / "mnt"
    mount.mkdir()
    with image.open("wb") as handle:
        handle.truncate(size_mb * 1024 * 1024)
    try:
        subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], check=True, capture_output=True)
        done = subprocess.run(
            ["mount", "-o", "loop", str(image), str(mount)], check=False, capture_output=True, text=True
        )
        if done.returncode != 0:
            print(f"XFS: skipped (cannot loop-mount: {done.stderr.strip()})")
            yield None
            return
        try:
            yield mount
        finally:
            subprocess.run(["umount", str(mount)], check=False)
    finally:
        shutil.rmtree(work)
