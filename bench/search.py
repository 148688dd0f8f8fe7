"""The search tool against ripgrep run directly, on a generated 20,000-file tree.

    .venv/bin/python bench/search.py [--files 20000] [--runs 15]

The tree: 200 folders of 100 small Python-like files (about 40 lines each), a gitignored
build/ folder and a .git folder. Baseline: `rg` with the exact options the tool passes,
started with subprocess and its whole output read (what a person would type, minus the
terminal). Measured: the `search` tool as the agent calls it (spawn rg, read and parse its
output, sort, cap, format). Both search for a word found in about 1 line of 200 (some 4,000 matches, under the
scan cap, so both read every match) and for a
word found nowhere. Medians of the runs, taken in turn (one of each, then again) so noise
hits both alike; target ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from dshd.agent.tools import Policy, ToolContext  # noqa: E402
from dshd.tools import search as tool  # noqa: E402

WORDS = "alpha beta gamma delta parse token buffer render socket cache index query".split()


def make_tree(root: Path, files: int) -> None:
    rng = random.Random(7)
    per_dir = 100
    for n in range(files):
        folder = root / "src" / f"pkg{n // per_dir:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(40):
            word = rng.choice(WORDS)
            lines.append(f"def {word}_{i}(x):  # needle {i}" if rng.random() < 0.005 else f"    {word} = compute({i}, x)")
        (folder / f"mod{n % per_dir:03d}.py").write_text("\n".join(lines) + "\n")
    (root / "build").mkdir()
    for n in range(200):
        (root / "build" / f"gen{n}.py").write_text("needle\n" * 40)
    (root / ".gitignore").write_text("build/\n")
    (root / ".git").mkdir()


def timed_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def interleaved_medians(first, second, runs: int) -> tuple[float, float]:
    """Medians of ``runs`` timings of each, taken in turn so machine noise hits both alike."""
    a, b = [], []
    for _ in range(runs):
        a.append(timed_ms(first))
        b.append(timed_ms(second))
    return statistics.median(a), statistics.median(b)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        make_tree(root, args.files)
        ctx = ToolContext("bench", 1, 1, root, Policy("workspace-write", False, ()))
        loop = asyncio.new_event_loop()
        print(f"search: {args.files} files, medians of {args.runs} runs")
        for pattern in ("needle", "nowhere_to_be_found"):
            rg_args = [tool.rg_binary(), "--no-heading", "--with-filename", "--line-number", "--null", "--color", "never",
                       "--max-columns", str(tool.COLUMN_CAP), "--max-columns-preview", *tool.COMMON, "--regexp", pattern, "--", "."]

            def direct() -> None:
                subprocess.run(rg_args, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)

            def through_tool() -> None:
                result = loop.run_until_complete(tool.search(ctx, {"pattern": pattern}))
                assert result.ok, result.content

            direct()
            through_tool()  # warm the page cache and the imports
            baseline, measured = interleaved_medians(direct, through_tool, args.runs)
            found = loop.run_until_complete(tool.search(ctx, {"pattern": pattern})).content.splitlines()[0]
            print(f"  {pattern!r:24} rg direct {baseline:7.1f} ms   search tool {measured:7.1f} ms   ratio {measured / baseline:.2f}   ({found})")
        loop.close()


if __name__ == "__main__":
    main()
