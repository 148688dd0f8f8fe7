"""`dshd run` against the editor's path to the same answer, in one run (scripted model,
private $XDG_RUNTIME_DIR so no shared daemon is found: the run is in-process):

    .venv/bin/python bench/run.py [--runs 15]

- `dshd run "hi" --json`: process start -> exit (its last line the result line).
- `dshd serve`: spawn -> `initialize` -> `dsh/session/create` -> `dsh/agent/prompt "hi"`
  answered -> `shutdown` -> `exit` -> process exit.

Both run the same one-reply script on the same workspace, interleaved, medians; beside
the wall time, the CPU time of the process (user + system, from the kernel's accounting
of the reaped child), which a machine busy with other work inflates far less.
Target: run / serve <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rpc import Client  # noqa: E402

DSHD = Path(sys.executable).with_name("dshd")
CONFIG = "plugins = [\"plan\", \"goals\"]\n\n[model]\nprovider = \"scripted\"\nscript = \"script.json\"\n"
REPLY = {"text": "Hello from the scripted model.", "usage": {"inputTokens": 12, "outputTokens": 6}}


def workspace(root: Path) -> Path:
    (root / ".dsh").mkdir(parents=True, exist_ok=True)
    (root / ".dsh" / "config.toml").write_text(CONFIG)
    (root / "script.json").write_text(json.dumps({"replies": [REPLY]}))
    return root


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def headless(env: dict, root: Path) -> tuple[float, float]:
    cpu0 = child_cpu()
    t0 = time.perf_counter()
    done = subprocess.run([str(DSHD), "run", "hi", "--json"], cwd=root, env=env, capture_output=True, timeout=60)
    elapsed = time.perf_counter() - t0
    cpu = child_cpu() - cpu0
    lines = done.stdout.decode().splitlines()
    last = json.loads(lines[-1]) if lines else {}
    if done.returncode != 0 or last.get("type") != "result":
        raise SystemExit(f"dshd run failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return elapsed, cpu


def editor(env: dict, root: Path) -> tuple[float, float]:
    cpu0 = child_cpu()
    t0 = time.perf_counter()
    client = Client([str(DSHD), "serve"], env=env, cwd=str(root))
    client.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}})
    agent = client.request("dsh/session/create", {})["agentId"]
    result = client.request("dsh/agent/prompt", {"agentId": agent, "text": "hi"})
    client.request("shutdown", None)
    client.send({"jsonrpc": "2.0", "method": "exit"})
    client.close()  # waits for the process to exit
    elapsed = time.perf_counter() - t0
    cpu = child_cpu() - cpu0
    if result.get("stopReason") != "end-turn":
        raise SystemExit(f"dshd serve's prompt ended {result}")
    return elapsed, cpu


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms (min {min(values) * 1000:6.1f}, max {max(values) * 1000:6.1f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dshd-bench-run-") as tmp:
        runtime = Path(tmp) / "rt"
        runtime.mkdir(mode=0o700)
        home = Path(tmp) / "home"
        home.mkdir()
        env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "XDG_CONFIG_HOME": str(home)}
        env.pop("DSHD_LOG_LEVEL", None)
        root = workspace(Path(tmp) / "ws")
        headless(env, root)  # page cache and bytecode for both
        editor(env, root)
        runs: list[tuple[float, float]] = []
        serves: list[tuple[float, float]] = []
        for _ in range(args.runs):
            runs.append(headless(env, root))
            serves.append(editor(env, root))
        print(f"dshd run vs dshd serve, one prompt on the scripted model, median of {args.runs}, interleaved")
        for label, index in (("wall", 0), ("CPU", 1)):
            run_s, serve_s = [r[index] for r in runs], [s[index] for s in serves]
            ratio = statistics.median(run_s) / statistics.median(serve_s)
            print(f"  {label}: dshd run \"hi\" --json (start -> exit)                      {ms(run_s)}   ratio {ratio:5.3f}   (target <= 1.2)")
            print(f"  {label}: dshd serve spawn -> initialize -> prompt -> shutdown/exit  {ms(serve_s)}   ratio 1.000")


if __name__ == "__main__":
    main()
