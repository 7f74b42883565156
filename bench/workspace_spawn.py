"""Benchmark: an isolated spawn's copy (`create_workspace`: listing, base and copy, the record) of a
generated git work tree of 10,000 files (about 90 MB) vs `cp -a --reflink=auto` of the same files, in the same run.
Prints the median of each and their ratio (target <= 1.5), on the default filesystem and, when run as root, on an XFS
loop mount with reflink.

    uv run python bench/workspace_spawn.py [--files N] [--megabytes M] [--runs R]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.verdict import Target, report
from bench.workspace_support import make_git_tree, tree_bytes, xfs_reflink_mount
from eukhe.workspace import WorkspaceLayout, create_workspace


def copy_with_cp(tree: Path, dest: Path) -> float:
    """`cp -a --reflink=auto` of the tree's files (its top-level entries but .git and the ignored target/)."""
    entries = [str(p) for p in sorted(tree.iterdir()) if p.name not in (".git", "target")]
    dest.mkdir()
    os.sync()  # no writeback of an earlier round runs into this one
    start = time.perf_counter()
    subprocess.run(["cp", "-a", "--reflink=auto", *entries, str(dest)], check=True)
    return time.perf_counter() - start


def copy_with_spawn(tree: Path, root: Path, child: str) -> tuple[float, str]:
    layout = WorkspaceLayout.at(root, "bench", child)
    os.sync()
    start = time.perf_counter()
    copied = create_workspace(tree, layout)
    elapsed = time.perf_counter() - start
    how = f"{copied.files} files, {copied.cloned} file copies cloned, {copied.copied_bytes} bytes copied"
    return elapsed, how


def measure(where: Path, files: int, total: int, runs: int, label: str) -> Target:
    tree = where / "tree"
    paths = make_git_tree(tree, files, total)
    print(f"{label}: a git work tree of {len(paths)} files, {tree_bytes(paths, tree) / 1e6:.1f} MB, at {where}")
    scratch = where / "scratch"
    scratch.mkdir()
    cp_times: list[float] = []
    spawn_times: list[float] = []
    how = ""
    for index in range(runs + 1):  # the first round warms the page cache and is not counted
        cp_time = copy_with_cp(tree, scratch / f"cp{index}")
        spawn_time, how = copy_with_spawn(tree, scratch / "workspaces", f"child{index}")
        if index:
            cp_times.append(cp_time)
            spawn_times.append(spawn_time)
        shutil.rmtree(scratch / f"cp{index}")
        shutil.rmtree(scratch / "workspaces" / "bench" / f"child{index}")
    c, s = statistics.median(cp_times), statistics.median(spawn_times)
    print(f"  cp -a --reflink=auto (one copy):  median {c * 1000:8.1f} ms over {runs} runs")
    print(f"  create_workspace (base and copy): median {s * 1000:8.1f} ms over {runs} runs ({how})")
    print(f"  ratio spawn / cp: {s / c:.2f} (target <= 1.5); per copy made, spawn / cp: {s / 2 / c:.2f}")
    return Target(f"isolated spawn / cp -a --reflink=auto, {label}", s / c, "<=", 1.5, "x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--megabytes", type=int, default=90)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the byte-copy warning would print once per run
    total = args.megabytes * 1_000_000
    targets = []
    with tempfile.TemporaryDirectory(prefix="ek-bench-") as tmp:
        targets.append(measure(Path(tmp), args.files, total, args.runs, "default fs"))
    with xfs_reflink_mount() as mount:
        if mount is not None:
            targets.append(measure(mount, args.files, total, args.runs, "XFS"))
    report(targets)


if __name__ == "__main__":
    main()
