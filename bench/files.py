"""write_file and read_file through directory handles against the by-name way they worked
before, on 1,000 small files, in the same run.

    .venv/bin/python bench/files.py [--files 1000] [--runs 9]

Both sides run the real tools (argument checks, path resolve, the cap, the diff not made
since no one is asked, the result text) on files two folders down (src/pkgNN/modNNN.py,
about 1 KiB each). Measured: the tools as they are (:mod:`dshd.tools.safepath`: every
folder opened from the root handle with O_NOFOLLOW, O_EXCL temporary file, rename within
the folder handle). Baseline: the same tools with their file layer swapped for the by-name
one they had (exists/is_dir/read_bytes by path; mkdir -p, mkstemp, chmod, os.replace by
path), kept here only as the yardstick. A run writes every file (replacing it) and then
reads every file, both ways in batches of 50 taken in turn so noise hits both alike;
medians of the runs. Target ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import stat
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from dshd.agent.tools import Policy, ToolContext  # noqa: E402
from dshd.tools import files, safepath  # noqa: E402


def by_name_layer() -> types.SimpleNamespace:
    """The file layer as it was: everything by path, after the one resolve."""

    def lstat(root: Path, target: Path) -> os.stat_result | None:
        try:
            return os.stat(target)
        except FileNotFoundError:
            return None

    def read_bytes(root: Path, target: Path, cap: int) -> bytes:
        if target.is_dir():
            raise safepath.NotRegular(target.name, "a folder")
        return target.read_bytes()

    def write_atomically(root: Path, target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".dsh-tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    return types.SimpleNamespace(
        lstat=lstat, read_bytes=read_bytes, write_atomically=write_atomically,
        human=safepath.human, NotRegular=safepath.NotRegular,
    )


def paths(count: int) -> list[str]:
    return [f"src/pkg{n // 100:02d}/mod{n % 100:03d}.py" for n in range(count)]


def content(n: int) -> str:
    return "".join(f"def f{n}_{i}(x):\n    return x + {i}\n" for i in range(24))


def timed_batch(loop: asyncio.AbstractEventLoop, ctx: ToolContext, batch: list[tuple[int, str]], layer, tool: str) -> float:
    """Milliseconds for ``tool`` on every file of ``batch`` with ``layer`` as the tools'
    file layer."""
    real = files.safepath
    files.safepath = layer
    try:
        start = time.perf_counter()
        for n, name in batch:
            if tool == "write_file":
                out = loop.run_until_complete(files.write_file(ctx, {"path": name, "content": content(n)}))
            else:
                out = loop.run_until_complete(files.read_file(ctx, {"path": name}))
            assert out.ok, out
        return (time.perf_counter() - start) * 1000
    finally:
        files.safepath = real


def one_run(loop: asyncio.AbstractEventLoop, ctx: ToolContext, names: list[str], layers: dict) -> dict:
    """Every file written then read by each layer, in batches of 50 taken in turn (so a
    busy moment of the machine hits both alike). ``{(tool, layer name): ms}``."""
    totals = {(tool, name): 0.0 for tool in ("write_file", "read_file") for name in layers}
    numbered = list(enumerate(names))
    for tool in ("write_file", "read_file"):
        for start in range(0, len(numbered), 50):
            batch = numbered[start:start + 50]
            for name, layer in layers.items():
                totals[tool, name] += timed_batch(loop, ctx, batch, layer, tool)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        ctx = ToolContext("bench", 1, 1, root, Policy("workspace-write", False, ()))
        names = paths(args.files)
        loop = asyncio.new_event_loop()
        by_name = by_name_layer()
        layers = {"by name": by_name_layer(), "handles": safepath}
        one_run(loop, ctx, names, layers)  # create the tree and warm up both ways
        runs = [one_run(loop, ctx, names, layers) for _ in range(args.runs)]
        print(f"files: {args.files} small files, medians of {args.runs} runs (ms per {args.files} calls)")
        print(f"  {'':10} {'by name (before)':>17} {'dir handles (now)':>18}  ratio (target <= 1.2)")
        for tool in ("write_file", "read_file"):
            b = statistics.median(r[tool, "by name"] for r in runs)
            h = statistics.median(r[tool, "handles"] for r in runs)
            print(f"  {tool:10} {b:17.1f} {h:18.1f}  {h / b:.2f}")
        loop.close()


if __name__ == "__main__":
    main()
