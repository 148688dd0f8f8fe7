"""Daemon spawn -> `initialize` answered, on the scripted model and on provider openai.

    .venv/bin/python bench/spawn.py [--runs 15] [--also PATH]...

The scripted model is the baseline, measured in the same run, interleaved with the
openai runs. A provider's SDK is imported on its first model call, not at start-up, so
the two should match (ratio ~1.0). `--also PATH` adds another build's `dshd` (e.g. the
one before a change), interleaved with this one, on the scripted model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rpc import Client, dshd_argv  # noqa: E402

SECTION = {"plan": {"section": "Plan first."}}
CONFIGS = {
    "scripted": {**SECTION, "model": {"provider": "scripted"}},
    "openai": {**SECTION, "model": {"provider": "openai", "model": "m", "baseUrl": "http://127.0.0.1:9/v1"}},
}


def spawn_once(argv: list[str], config: dict, root: str) -> float:
    t0 = time.perf_counter()
    client = Client(argv, env={**os.environ, "DSHD_LOG_LEVEL": "WARNING"}, cwd=root)
    client.request(
        "initialize",
        {"processId": None, "rootUri": Path(root).as_uri(), "capabilities": {}, "initializationOptions": {"config": config}},
    )
    elapsed = time.perf_counter() - t0
    client.request("shutdown", None)
    client.send({"jsonrpc": "2.0", "method": "exit"})
    client.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--also", action="append", default=[], metavar="PATH", help="another dshd to measure (scripted)")
    args = ap.parse_args()
    cases = [(f"this build, {name}", dshd_argv(), config) for name, config in CONFIGS.items()]
    cases += [(f"{path}, scripted", [path, "serve"], CONFIGS["scripted"]) for path in args.also]
    samples: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    with tempfile.TemporaryDirectory() as root:
        for _, argv, config in cases:  # warm the page cache
            spawn_once(argv, config, root)
        for _ in range(args.runs):
            for label, argv, config in cases:
                samples[label].append(spawn_once(argv, config, root))
    base = statistics.median(samples[cases[0][0]])
    print(f"spawn -> initialize answered, median of {args.runs}, interleaved (baseline: {cases[0][0]}):")
    for label, values in samples.items():
        med = statistics.median(values)
        print(f"  {label:<44} {med * 1000:7.1f} ms   (min {min(values) * 1000:6.1f} ms)   ratio {med / base:5.2f}")


if __name__ == "__main__":
    main()
