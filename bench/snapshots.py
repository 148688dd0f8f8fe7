"""Checkpoints of a 10,000-file workspace: the first snapshot, a snapshot after one file
changed, and the restore of one file, each beside two baselines measured in the same run
on the same tree: ``git status --porcelain`` of the person's repository (what any tool
pays to learn what changed) and an ``os.walk`` with an ``lstat`` of every file (the floor
of looking at each file once from Python).

    .venv/bin/python bench/snapshots.py [--files 10000] [--runs 20]

The workspace is a git repository of small files in nested folders (20 packages x 10
modules x 50 files), made in a temporary folder and removed after. Targets: first
snapshot <= 2 s, later ones <= 50 ms median, a one-file restore <= 50 ms median.
Prints the figures and exits 0; the targets are shown, not enforced.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from dshd.checkpoints import ShadowRepo  # noqa: E402


def make_workspace(root: Path, count: int) -> list[str]:
    paths = []
    for n in range(count):
        rel = f"pkg{n // 500:02d}/mod{n // 50 % 10}/file{n % 50:02d}.py"
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# file {n}\n" + "".join(f"value_{i} = {n * i}\n" for i in range(8)))
        paths.append(rel)
    (root / ".gitignore").write_text("*.pyc\n__pycache__/\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "core.bigFileThreshold=1"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(root), "commit", "-qm", "bench"], check=True)
    return paths


def ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def git_status(root: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["git", "-C", str(root), "status", "--porcelain"], check=True, capture_output=True)
    return ms(start)


def walk_stat(root: Path) -> float:
    start = time.perf_counter()
    for folder, dirs, names in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")
        if ".dsh" in dirs:
            dirs.remove(".dsh")
        for name in names:
            os.lstat(os.path.join(folder, name))
    return ms(start)


def row(name: str, figure: float, target: float, status: float, walk: float) -> str:
    verdict = "ok" if figure <= target else "OVER"
    return (f"{name:<28} {figure:9.1f} ms  (target {target:6.0f} ms: {verdict:4})  "
            f"git status {status:7.1f} ms = {figure / status:5.2f}x   walk+lstat {walk:7.1f} ms = {figure / walk:5.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="dshd-bench-checkpoints-"))
    try:
        root = base / "ws"
        root.mkdir()
        start = time.perf_counter()
        paths = make_workspace(root, args.files)
        print(f"workspace: {args.files} files made in {ms(start) / 1000:.1f} s (a git repository, one commit)")
        git_status(root)  # the person's index is fresh after the commit; warm both sides alike
        first_status, first_walk = git_status(root), walk_stat(root)
        shadow = ShadowRepo(root)
        start = time.perf_counter()
        first = shadow.snapshot()
        first_ms = ms(start)
        print(f"first snapshot: {first.files} files, tree {first.tree[:12]}")

        snap_ms, status_ms, walk_ms = [], [], []
        previous = first
        for run in range(args.runs):
            target = root / paths[(run * 397) % len(paths)]
            target.write_text(target.read_text() + f"changed = {run}\n")
            start = time.perf_counter()
            previous = shadow.snapshot()
            snap_ms.append(ms(start))
            status_ms.append(git_status(root))
            walk_ms.append(walk_stat(root))

        restore_ms, restore_status, restore_walk = [], [], []
        for run in range(args.runs):
            rel = paths[(run * 211) % len(paths)]
            (root / rel).write_text("overwritten\n")
            start = time.perf_counter()
            shadow.restore(previous.tree, [rel], {"bench": run})
            restore_ms.append(ms(start))
            restore_status.append(git_status(root))
            restore_walk.append(walk_stat(root))
        unchanged = []
        for _ in range(5):
            start = time.perf_counter()
            shadow.snapshot()
            unchanged.append(ms(start))

        med = statistics.median
        print(row("first snapshot", first_ms, 2000, first_status, first_walk))
        print(row(f"snapshot, 1 file changed", med(snap_ms), 50, med(status_ms), med(walk_ms)))
        print(row("restore of 1 file", med(restore_ms), 50, med(restore_status), med(restore_walk)))
        print(row("snapshot, nothing changed", med(unchanged), 50, med(status_ms), med(walk_ms)))
        print(f"snapshot runs (ms): min {min(snap_ms):.1f}, max {max(snap_ms):.1f}; "
              f"restore runs (ms): min {min(restore_ms):.1f}, max {max(restore_ms):.1f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
