"""What the sandbox adds to every command: `run_command "true"` in each mode against `true`
started without one, in the same run.

    .venv/bin/python bench/sandbox.py [--runs 30]

Baseline: `/bin/sh -c true` through the same runner (own process group, output pipe,
process-table sweep at the end) without bubblewrap. Measured: the run_command tool as the
agent calls it (argument checks, the cached probe, bubblewrap, the runner, the result text)
in read-only, workspace-write and full-access (network off). Medians; the figure a person
waits for is the added milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from dshd.agent.tools import Policy, ToolContext  # noqa: E402
from dshd.sandbox import probe, run  # noqa: E402
from dshd.tools.run import RunCommand  # noqa: E402


async def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def main(runs: int) -> None:
    found = await probe()
    if not found.ok:
        print(f"sandbox: no sandbox here ({found.reason}); nothing to measure")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        (root / ".git").mkdir()
        tool = RunCommand(None)

        async def bare() -> None:
            await run(["/bin/sh", "-c", "true"], cwd=root, env=dict(os.environ), timeout_s=30, output_cap=32768)

        await bare()
        baseline = await median_ms(bare, runs)
        print(f"sandbox: run_command \"true\", medians of {runs} runs")
        print(f"  no sandbox (baseline)        {baseline:6.1f} ms")
        for mode in ("read-only", "workspace-write", "full-access"):
            ctx = ToolContext("bench", 1, 1, root, Policy(mode, False, ()))

            async def sandboxed() -> None:
                result = await tool(ctx, {"command": "true"})
                assert result.ok, result.content

            await sandboxed()
            measured = await median_ms(sandboxed, runs)
            print(f"  {mode:16} (network off) {measured:6.1f} ms   +{measured - baseline:.1f} ms   ratio {measured / baseline:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
