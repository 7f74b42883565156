"""Benchmark: a hand-back with 10 changed files (read the three trees, plan, take the 10, write the
record) vs `git status` on the same tree (10,000 files, about 90 MB), in the same run. Prints the median of each and
their ratio (target <= 2). The hand-back runs with `remove_now=False`: it ends with base and copy renamed aside and
the symlink in place; removing those two trees of 10,000 files (`remove_retired`, which a caller can run in the
background) is timed and printed on its own line.

    uv run python bench/handback.py [--files N] [--megabytes M] [--runs R] [--changed K]
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
from bench.workspace_support import GIT_ENV, make_git_tree, xfs_reflink_mount
from eukhe.workspace import WorkspaceLayout, create_workspace, hand_back, remove_retired


def settle() -> None:
    """Write out what came before the timed part. One sync writes the dirty data; on ext4 that writeback allocates
    the delayed blocks, whose metadata a second sync commits (else the first fsync timed next pays for a spawn of
    20,000 files: 10-20 ms here)."""
    os.sync()
    os.sync()


def git_status(tree: Path) -> float:
    settle()
    start = time.perf_counter()
    subprocess.run(["git", "status", "--porcelain"], cwd=tree, env=GIT_ENV, check=True, capture_output=True)
    return time.perf_counter() - start


def one_hand_back(tree: Path, root: Path, child: str, paths: list[str], changed: int) -> tuple[float, float, int]:
    """Spawn (untimed), change `changed` files in the copy, then time the hand-back (to its record, base and copy
    set aside, the symlink in place) and, on its own, the removal of the retired base and copy."""
    layout = WorkspaceLayout.at(root, "bench", child)
    create_workspace(tree, layout)
    for relative in paths[1 : 1 + changed * 97 : 97]:  # spread over the tree
        with (layout.copy / relative).open("ab") as handle:
            handle.write(b"changed by the child\n")
    settle()
    start = time.perf_counter()
    report = hand_back(layout, remove_now=False)
    handed_back = time.perf_counter() - start
    start = time.perf_counter()
    remove_retired(layout)
    removed = time.perf_counter() - start
    shutil.rmtree(layout.dir)
    return handed_back, removed, len(report.paths_taken)


def revert(tree: Path) -> None:
    """Put the parent's tree back to its commit between rounds."""
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=tree, env=GIT_ENV, check=True)


def measure(where: Path, files: int, total: int, *, runs: int, changed: int, label: str) -> Target:
    tree = where / "tree"
    paths = make_git_tree(tree, files, total)
    print(f"{label}: a git work tree of {len(paths)} files at {where}; {changed} files changed by the child")
    git_times: list[float] = []
    ours: list[float] = []
    cleanups: list[float] = []
    taken = 0
    for index in range(runs + 1):  # the first round warms the caches and is not counted
        git_time = git_status(tree)
        hand_back_time, cleanup_time, taken = one_hand_back(tree, where / "workspaces", f"c{index}", paths, changed)
        revert(tree)
        if index:
            git_times.append(git_time)
            ours.append(hand_back_time)
            cleanups.append(cleanup_time)
    g, h, c = statistics.median(git_times), statistics.median(ours), statistics.median(cleanups)
    print(f"  git status --porcelain:         median {g * 1000:7.1f} ms over {runs} runs")
    print(f"  hand-back (remove_now=False):   median {h * 1000:7.1f} ms over {runs} runs ({taken} paths taken)")
    print(f"  remove_retired (base and copy): median {c * 1000:7.1f} ms")
    print(f"  ratio hand-back / git status: {h / g:.2f} (target <= 2); with the clean-up: {(h + c) / g:.2f}")
    return Target(f"hand-back / git status, {label}", h / g, "<=", 2, "x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--megabytes", type=int, default=90)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--changed", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    total = args.megabytes * 1_000_000
    targets = []
    with tempfile.TemporaryDirectory(prefix="ek-bench-") as tmp:
        where = Path(tmp)
        targets.append(measure(where, args.files, total, runs=args.runs, changed=args.changed, label="default fs"))
    with xfs_reflink_mount() as mount:
        if mount is not None:
            targets.append(measure(mount, args.files, total, runs=args.runs, changed=args.changed, label="XFS"))
    report(targets)


if __name__ == "__main__":
    main()
